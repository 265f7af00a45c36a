"""How quickly does the pass explorer follow its slider on a LeNet?

The explorer (``hybridlab.viz.pass_explorer``) over a hybridized LeNet (two convolutions,
two poolings, three dense layers, as in lesson 05 and the seeds): every slider step
re-renders the stage's graph with graphviz (PNG), its IR diff against the stage before and,
on the last stage, the generated source -- what ``PassExplorer.refresh`` does. Measured:
the median time of one slider step, over interleaved sweeps across all stages, and the
time to build the model (run the pipeline and keep every stage) once.
Target: a slider step <= 300 ms.

    python3 benchmarks/pass_explorer.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab import gluon
from hybridlab import ndarray as nd
from hybridlab.gluon import nn
from hybridlab.lab.passes import PassModel
from hybridlab.viz.pass_explorer import PassExplorer


class LeNet(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1 = nn.Conv2D(6, kernel_size=5, activation="relu")
            self.pool1 = nn.MaxPool2D(pool_size=2)
            self.conv2 = nn.Conv2D(16, kernel_size=5, activation="relu")
            self.pool2 = nn.MaxPool2D(pool_size=2)
            self.fc1 = nn.Dense(120, activation="relu")
            self.fc2 = nn.Dense(84, activation="relu")
            self.fc3 = nn.Dense(10)

    def hybrid_forward(self, F, x):
        x = self.pool2(self.conv2(self.pool1(self.conv1(x))))
        return self.fc3(self.fc2(self.fc1(x)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    net = LeNet()
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 1, 28, 28))).wait_to_read()
    start = time.perf_counter()
    model = PassModel(net)
    build = time.perf_counter() - start
    explorer = PassExplorer(model, stage=0)
    stages = len(model.stages)
    steps = []
    for repeat in range(args.repeats + 1):  # the first sweep warms graphviz up: dropped
        order = range(1, stages) if repeat % 2 == 0 else range(stages - 2, -1, -1)
        for index in order:
            start = time.perf_counter()
            explorer.slider.value = index  # observe -> refresh, as a slider move does
            if repeat:
                steps.append(time.perf_counter() - start)
    step = statistics.median(steps)
    print(f"pass explorer on a hybridized LeNet ({stages} stages), medians of "
          f"{len(steps)} slider steps over {args.repeats} sweeps")
    print(f"  {'one slider step (render, diff, source) <= 300 ms':52s} {step * 1e3:8.1f} ms  "
          f"{'met' if step <= 0.3 else 'MISSED'}  (slowest {max(steps) * 1e3:.1f} ms)")
    print(f"  {'building the model (pipeline, every stage kept)':52s} {build * 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
