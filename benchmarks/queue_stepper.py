"""How responsive is the queue stepper, and what does watching the engine cost?

Two questions, measured side by side in one run (medians of interleaved repeats):

1. **A click's redraw**: after one Step on a queue of N pending tasks, the stepper
   re-renders its drawing (graphviz ``dot`` to SVG), its per-array queues and counters --
   what ``QueueStepper.refresh()`` does on every click. Targets: <= 150 ms for 50 tasks and
   <= 300 ms for 500 (drawn through the window of the ready frontier + the newest 100).
2. **Pushing while watched**: ``a + b`` pushed to a StepEngine with the stepper's model
   attached (its push hook records a count; nothing is drawn per push) against the same
   pushes with no model attached. Target: <= 2x.

    python3 benchmarks/queue_stepper.py [--repeats 7]

Needs ipywidgets and graphviz's ``dot`` (the notebooks extra).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab import engine, nd
from hybridlab.lab import queue
from hybridlab.viz import stepper


def redraw_ms(tasks: int) -> float:
    """Build a queue of ``tasks`` pending tasks, Step once, time the refresh (ms)."""
    held = engine.StepEngine()
    with engine.engine_scope(held):
        arrays = {"x": nd.zeros((4,))}
        view = stepper.QueueStepper(queue.QueueModel(held, lambda: arrays))
        for i in range(tasks - 1):
            arrays[f"y{i % 20}"] = arrays["x"] + i  # many readers of x, 20 named results
        view.model.step()
        gc.collect()
        start = time.perf_counter()
        view.refresh()
        elapsed = time.perf_counter() - start
        view.close()
        held.run()
    return elapsed * 1e3


def push_us(watched: bool, pushes: int = 2000) -> float:
    """Microseconds per ``a + b`` pushed to a StepEngine, with or without the model."""
    held = engine.StepEngine()
    with engine.engine_scope(held):
        a, b = nd.ones((1, 16)), nd.ones((1, 16))
        held.run()
        model = queue.QueueModel(held, lambda: {}) if watched else None
        gc.collect()  # the previous measurement's garbage is not this one's cost
        start = time.perf_counter()
        for _ in range(pushes):
            a + b
        elapsed = time.perf_counter() - start
        if model is not None:
            model.detach()
        held.run()
    return elapsed / pushes * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    redraws: dict[int, list[float]] = {50: [], 500: []}
    pushes: dict[bool, list[float]] = {False: [], True: []}
    redraw_ms(10)  # warm up: graphviz, ipywidgets imports
    for _ in range(args.repeats):  # interleaved
        for size in redraws:
            redraws[size].append(redraw_ms(size))
        for watched in pushes:
            pushes[watched].append(push_us(watched))
    print(f"queue stepper, medians of {args.repeats} interleaved repeats")
    results = []
    for size, target in ((50, 150.0), (500, 300.0)):
        median = statistics.median(redraws[size])
        results.append((f"redraw after Step, {size} tasks <= {target:g} ms",
                        f"{median:.1f} ms", median <= target))
    plain, watched = statistics.median(pushes[False]), statistics.median(pushes[True])
    results.append(("push a + b with the stepper attached <= 2x without",
                    f"{watched:.2f} vs {plain:.2f} µs = {watched / plain:.2f}x",
                    watched <= 2 * plain))
    for label, value, met in results:
        print(f"  {label:52s} {value:28s} {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
