"""What a new sequence length costs a hybridized loop (``F.contrib.foreach``).

A recurrent block traced with ``F.contrib.foreach`` holds ONE loop node whatever the
length; its body is compiled once per row shape. So a call with a new length compiles
only the outer program again: shape inference and the memory plan of a handful of nodes,
while the body's compiled function is reused. Measured on a tanh RNN cell (hidden 64,
batch 8), NaiveEngine: the first call (trace, outer program, body), the first call of
each new length (its parts timed: shape inference and the pass pipeline with the memory
plan, read from the CachedOp's compile), and a cached call, medians over ``--repeats``
fresh blocks; the count of body compilations is printed to show it stays at one.

    python3 benchmarks/loop_lengths.py [--lengths 5 10 20 40] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab import engine, nd
from hybridlab.gluon import nn
from hybridlab.graph import passes, shapes
from hybridlab.ops import control_flow


class Cell(nn.HybridBlock):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        with self.name_scope():
            self.dense = nn.Dense(hidden, in_units=hidden, flatten=False)

    def hybrid_forward(self, F, x, states):  # type: ignore[no-untyped-def]
        def step(row, carried):  # type: ignore[no-untyped-def]
            h = F.tanh(self.dense(row) + carried[0])
            return h, [h]
        return F.contrib.foreach(step, x, states)


def timed(call):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = call()
    out[0].wait_to_read()
    return time.perf_counter() - start


def one_block(lengths: list[int], hidden: int, batch: int) -> dict[str, list[float]]:
    block = Cell(hidden)
    block.initialize()
    block.hybridize(autotune=False)
    h0 = nd.zeros((batch, hidden))
    data = {n: nd.random.uniform(shape=(n, batch, hidden)) for n in lengths}
    bodies = len(control_flow._COMPILED)
    found = {"first call": [timed(lambda: block(data[lengths[0]], [h0]))]}
    for n in lengths[1:]:
        found.setdefault("new length", []).append(timed(lambda n=n: block(data[n], [h0])))
        found.setdefault("cached call", []).append(timed(lambda n=n: block(data[n], [h0])))
    graph = block._cached_op._last.forward.graph  # the last outer program: its two parts
    avals = [v.aval for v in (node.out() for node in graph.inputs)]
    start = time.perf_counter()
    typed = shapes.infer_graph(block._traces[(False, 2)].traced.graph, avals)
    middle = time.perf_counter()
    passes.run_pipeline(typed)
    found["shape inference"] = [middle - start]
    found["passes + memory plan"] = [time.perf_counter() - middle]
    found["bodies compiled"] = [float(len(control_flow._COMPILED) - bodies)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[5, 10, 20, 40])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    engine.set_engine("NaiveEngine")
    rows: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for key, values in one_block(args.lengths, args.hidden, args.batch).items():
            rows.setdefault(key, []).extend(values)
    for key, values in rows.items():
        value = statistics.median(values)
        text = f"{value:.0f}" if key == "bodies compiled" else f"{value * 1e3:8.2f} ms"
        print(f"{key:<22} {text}")


if __name__ == "__main__":
    main()
