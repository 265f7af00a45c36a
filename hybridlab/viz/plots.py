"""How much does hybridize save? Measured timings and their plots (lesson 02).

What this module teaches
------------------------
Hybridizing removes per-layer Python work; it cannot make numpy's matrix products
faster. So the gain is large when the network is deep and the batch small (overhead
dominates) and shrinks as arithmetic grows. We measure three things side by side, in
one run: the network run imperatively, hybridized, and the same arithmetic written
directly in numpy (the floor no framework on numpy can beat).

Invariants
----------
* Timings are medians of several repeats, reported as microseconds per call; only the
  ratios mean something across machines.
* :func:`speedup_callback` is a plain function (what the sliders call); it is tested
  across the sliders' whole range. matplotlib and ipywidgets are imported inside
  functions only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

BATCH_RANGE = (1, 256)  # slider limits, also used by the tests
WIDTH_RANGE = (16, 512)
DEPTH_RANGE = (1, 8)
SERIES = (("imperative_us", "imperative", "#fc8d62"),  # Timing field, label, colour
          ("hybridized_us", "hybridized", "#66c2a5"),
          ("numpy_us", "numpy floor", "#8da0cb"))


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


def time_call(fn: Callable[[], Any], repeats: int = 50, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean time of ``repeats`` calls, in microseconds.

    Like a training loop, the calls are issued back to back and the engine is synced
    once at the end of each round (``nd.waitall()``): with a lazy engine, waiting after
    every call would time the hand-over between threads, not the work.
    """
    from hybridlab import nd

    fn()  # warm-up: the first hybridized call traces and compiles
    nd.waitall()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        nd.waitall()
        samples.append((time.perf_counter() - start) / repeats)
    return statistics.median(samples) * 1e6


def make_mlp(width: int, depth: int, outputs: int = 10) -> Any:
    """``depth`` ReLU Dense layers of ``width`` units and a Dense output layer."""
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    for _ in range(depth):
        net.add(nn.Dense(width, activation="relu"))
    net.add(nn.Dense(outputs))
    net.initialize()
    return net


def numpy_mlp(net: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The same network as plain numpy: the floor for the timings."""
    layers = [(layer.weight.data().asnumpy(), layer.bias.data().asnumpy()) for layer in net]

    def forward(x: np.ndarray) -> np.ndarray:
        for weight, bias in layers[:-1]:
            x = np.maximum(x @ weight.T + bias, 0)
        weight, bias = layers[-1]
        return x @ weight.T + bias

    return forward


def measure_speedup(net: Any, x: Any, repeats: int = 50) -> Timing:
    """Time ``net(x)`` imperatively, then hybridized, and the numpy floor (if it is an MLP)."""
    net.hybridize(active=False)
    net(x).wait_to_read()  # finishes deferred initialisation before numpy_mlp reads weights
    imperative = time_call(lambda: net(x), repeats)
    net.hybridize()
    hybridized = time_call(lambda: net(x), repeats)
    forward, array = numpy_mlp(net), x.asnumpy()
    return Timing(imperative, hybridized, time_call(lambda: forward(array), repeats))


def speedup_point(batch_size: int, width: int, depth: int, repeats: int = 30) -> Timing:
    """Timings for a freshly made MLP with inputs of ``width`` features (seeded)."""
    from hybridlab import nd, random

    random.seed(0)
    net = make_mlp(width, depth)
    x = nd.random.normal(shape=(batch_size, width))
    return measure_speedup(net, x, repeats)


def speedup_callback(batch_size: int, width: int, depth: int, repeats: int = 30
                     ) -> tuple[Any, str]:
    """What the sliders call: a bar chart of one setting and its text summary."""
    import matplotlib.pyplot as plt

    timing = speedup_point(batch_size, width, depth, repeats)
    figure, axes = plt.subplots(figsize=(6, 2.6))
    axes.barh([label for _, label, _ in SERIES], [getattr(timing, f) for f, _, _ in SERIES],
              color=[colour for _, _, colour in SERIES])
    axes.set_xlabel("time per forward call (µs)")
    axes.set_title(f"batch {batch_size}, {depth} x Dense({width}): "
                   f"hybridize speed-up x{timing.speedup:.1f}")
    figure.tight_layout()
    return figure, f"batch={batch_size} width={width} depth={depth}: {timing}"


def speedup_widget(batch_size: int = 1, width: int = 64, depth: int = 4) -> Any:
    """Sliders for batch size, width and depth, redrawing :func:`speedup_callback`.

    The first setting's summary is also printed as plain cell output, so a notebook
    read without a running kernel (where widgets are blank) still shows the numbers.
    """
    import ipywidgets as widgets

    sliders = {
        "batch_size": widgets.SelectionSlider(options=[1, 4, 16, 64, 256], value=batch_size,
                                              description="batch"),
        "width": widgets.IntSlider(value=width, min=WIDTH_RANGE[0], max=WIDTH_RANGE[1],
                                   step=16, description="width"),
        "depth": widgets.IntSlider(value=depth, min=DEPTH_RANGE[0], max=DEPTH_RANGE[1],
                                   description="depth"),
    }
    output = widgets.Output()

    def redraw(change: Any = None) -> str:
        import matplotlib.pyplot as plt
        from IPython.display import display

        figure, text = speedup_callback(**{key: s.value for key, s in sliders.items()})
        output.clear_output(wait=True)
        with output:
            print(text)
            display(figure)
        plt.close(figure)
        return text

    for slider in sliders.values():
        slider.observe(redraw, names="value")
    print(redraw())
    return widgets.VBox([*sliders.values(), output])


def speedup_figure(batch_sizes: tuple[int, ...] = (1, 16, 64, 256), width: int = 128,
                   depth: int = 3, repeats: int = 20) -> Any:
    """A static figure: time per call against batch size, three ways (log-log)."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    timings = [speedup_point(b, width, depth, repeats) for b in batch_sizes]
    figure, axes = plt.subplots(figsize=(6, 3.2))
    for field, label, colour in SERIES:
        axes.plot(batch_sizes, [getattr(t, field) for t in timings], "o-", label=label,
                  color=colour)
    axes.set(xscale="log", yscale="log", xlabel="batch size (examples)",
             ylabel="time per forward call (µs)",
             title=f"MLP, {depth} x Dense({width}) + Dense(10)")
    axes.set_xticks(batch_sizes, [str(b) for b in batch_sizes])  # the measured sizes, plainly
    axes.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axes.yaxis.set_minor_formatter(ticker.NullFormatter())
    axes.legend()
    figure.tight_layout()
    for b, t in zip(batch_sizes, timings):
        print(f"batch {b:4d}: {t}")
    return figure
