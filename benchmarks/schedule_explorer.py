"""How responsive is the schedule explorer, and how fast is its list scheduler?

Measured side by side in one run (medians of interleaved repeats):

1. **A slider move**: the explorer's model re-schedules a 200-task graph and redraws its
   figure in place (``viz.schedule.draw`` on the reused figure, then the PNG the widget
   shows) -- what happens on every control change. Target: <= 200 ms.
2. **The simulator**: ``schedule_model.simulate`` on 10 000 tasks (random DAG, up to 3 dependencies
   each) on 16 workers. Target: <= 0.5 s.

    python3 benchmarks/schedule_explorer.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab.lab import schedule as schedule_model
from hybridlab.lab.schedule import ScheduleModel, TaskGraph
from hybridlab.viz.bundle import figure_png
from hybridlab.viz.schedule import draw


def random_graph(n: int, seed: int = 0) -> TaskGraph:
    rng = random.Random(seed)
    names = [rng.choice(["dot", "broadcast_add", "relu", "sum"]) for _ in range(n)]
    deps = [sorted({rng.randrange(i) for _ in range(rng.randint(0, 3))}) if i else []
            for i in range(n)]
    return TaskGraph(names, deps, [rng.uniform(0.1, 2.0) for _ in range(n)])


def redraw_ms(model: ScheduleModel, figure, workers: int) -> float:
    start = time.perf_counter()
    model.workers = workers
    figure_png(draw(model, figure), tight=False)  # as ScheduleExplorer.refresh
    return (time.perf_counter() - start) * 1e3


def simulate_s(graph: TaskGraph) -> float:
    start = time.perf_counter()
    schedule_model.simulate(graph.names, graph.deps, graph.measured, 16)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    model = ScheduleModel(random_graph(200), workers=2)
    figure = plt.figure(figsize=(9, 3.6))
    big = random_graph(10_000, seed=1)
    redraw_ms(model, figure, 3)  # warm up: matplotlib's fonts and caches
    redraws, simulations = [], []
    for i in range(args.repeats):  # interleaved; a different worker count each time
        redraws.append(redraw_ms(model, figure, 2 + i % 8))
        simulations.append(simulate_s(big))
    redraw, simulation = statistics.median(redraws), statistics.median(simulations)
    print(f"schedule explorer, medians of {args.repeats} interleaved repeats")
    for label, value, met in [
            ("slider move: reschedule + redraw, 200 tasks <= 200 ms", f"{redraw:.1f} ms",
             redraw <= 200),
            ("simulate 10 000 tasks on 16 workers <= 0.5 s", f"{simulation:.3f} s",
             simulation <= 0.5)]:
        print(f"  {label:56s} {value:>10s}  {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
