"""How quickly do the memory explorer and the speed-up widget follow their controls?

At the lessons' own sizes: the memory explorer over lesson 05's MLP (512 -> 256 -> 128 ->
10, batch 64), moving its step slider across the forward and the forward + backward
programs and switching the program; the speed-up widget of lesson 02 (its default
network), moving each slider, redrawn from measurements it already has (the widget
measures a new point once, in the background of a click's redraw; what a control must
do quickly is redraw). Measured: the median time of one control change, every control
of one instrument interleaved in rounds, each change timed as the widget's own handler
runs it. Target: every control <= 300 ms (median).

    python3 benchmarks/instrument_controls.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab import ndarray as nd
from hybridlab.gluon import nn

TARGET_MS = 300.0


def timed(change) -> float:
    start = time.perf_counter()
    change()
    return (time.perf_counter() - start) * 1000


def memory_controls(rounds: int) -> dict[str, list[float]]:
    from hybridlab.viz.memory import memory_explorer

    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"), nn.Dense(10))
    net.initialize()
    net.hybridize()
    net(nd.ones((64, 512))).wait_to_read()
    explorer = memory_explorer(net)
    times: dict[str, list[float]] = {"memory: step slider": [], "memory: program": []}
    for _ in range(rounds):
        for mode in explorer.MODES:
            times["memory: program"].append(timed(lambda m=mode: setattr(
                explorer.mode, "value", m)))
            for step in range(1, explorer.step.max + 1):
                times["memory: step slider"].append(timed(lambda s=step: setattr(
                    explorer.step, "value", s)))
    return times


def speedup_controls(rounds: int) -> dict[str, list[float]]:
    """Lesson 02's widget: its three batch stops measured first (as the lesson does), then
    the batch slider moved between them, and the network switched to a custom MLP and
    back (measured once first, too): redraws from points already measured."""
    from hybridlab.lab.timing import CUSTOM
    from hybridlab.viz.plots import speedup_widget

    widget = speedup_widget()
    stops = (64, 1024, 1)
    first: list[float] = []
    for batch in stops:
        first.append(timed(lambda b=batch: setattr(widget.sliders["batch_size"], "value", b)))
    first.append(timed(lambda: setattr(widget.network, "value", CUSTOM)))
    widget.network.value = widget.network.options[0]
    times: dict[str, list[float]] = {"speed-up: batch slider": [], "speed-up: network": [],
                                     "(speed-up: a new point, measured)": first}
    for _ in range(rounds):
        for batch in stops:
            times["speed-up: batch slider"].append(timed(
                lambda b=batch: setattr(widget.sliders["batch_size"], "value", b)))
        for kind in reversed(widget.network.options):
            times["speed-up: network"].append(timed(
                lambda k=kind: setattr(widget.network, "value", k)))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    results = {**memory_controls(args.rounds), **speedup_controls(args.rounds)}
    worst = 0.0
    print(f"{'control':34s} {'median ms':>10s} {'max ms':>8s} {'n':>4s}")
    for name, values in results.items():
        median = statistics.median(values)
        if not name.startswith("("):  # a new point's measurement is not a redraw
            worst = max(worst, median)
        print(f"{name:34s} {median:10.1f} {max(values):8.1f} {len(values):4d}")
    verdict = "meets" if worst <= TARGET_MS else "MISSES"
    print(f"slowest control: median {worst:.1f} ms; {verdict} the {TARGET_MS:.0f} ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
