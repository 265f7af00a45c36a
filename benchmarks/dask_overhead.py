"""What a task costs on Dask and on the ThreadedEngine: the same graph, two schedulers.

Two graphs, each run on both schedulers with two workers:

* **many tiny tasks**: ``branches`` independent ``relu(x * i)`` on a 4x4 array, added up
  as a tree -- the kernels take about a microsecond, so the time is the schedulers' own;
* **few large tasks**: ``8`` independent 600x600 matrix products, added up as a tree --
  the kernels take milliseconds, so the time is the work's.

The engine runs the graph imperatively (``nd``, one task per operator); Dask runs the
same graph written as a Symbol through ``hybridlab.dask`` (one task per operator node) on
a ``distributed.LocalCluster`` of 2 single-threaded workers: threads in this process
(``--processes`` for worker processes). The table gives medians of interleaved repeats,
per graph and per task, and the ratio. Also printed: how long the cluster takes to start.
One BLAS thread everywhere (threadpoolctl), so only the schedulers' workers differ.

    python3 benchmarks/dask_overhead.py [--repeats 7] [--branches 200] [--processes]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hybridlab as mx
from hybridlab import dask as hdask
from hybridlab import engine
from hybridlab import ndarray as nd


def tree_sum(F, values):
    while len(values) > 1:
        values = [F.broadcast_add(a, b) for a, b in zip(values[::2], values[1::2])] + (
            [values[-1]] if len(values) % 2 else [])
    return values[0]


def tiny(F, x, branches):
    return tree_sum(F, [F.relu(x * float(i)) for i in range(branches)])


def large(F, x, branches):
    return tree_sum(F, [F.dot(x, x * float(i + 1)) for i in range(branches)])


def run_engine(build, data, branches, workers=2):
    with engine.engine_scope(engine.ThreadedEngine(workers=workers)):
        x = nd.array(data)
        nd.waitall()
        start = time.perf_counter()
        build(nd, x, branches).wait_to_read()
        return time.perf_counter() - start


def run_dask(build, data, branches, client):
    symbol = build(mx.sym, mx.sym.var("x"), branches)
    start = time.perf_counter()
    hdask.compute(symbol, {"x": data}, client=client)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--branches", type=int, default=200)
    parser.add_argument("--processes", action="store_true",
                        help="Dask workers in processes (default: threads)")
    args = parser.parse_args()
    from distributed import Client, LocalCluster
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    cases = {  # name: (graph, input, branches)
        "many tiny tasks": (tiny, rng.standard_normal((4, 4)).astype(np.float32),
                            args.branches),
        "few large tasks": (large, (rng.standard_normal((600, 600)) / 25).astype(np.float32),
                            8),
    }
    started = time.perf_counter()
    with threadpool_limits(1), LocalCluster(
            n_workers=2, threads_per_worker=1, processes=args.processes,
            dashboard_address=None) as cluster, Client(cluster) as client:
        start_up = time.perf_counter() - started
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeats + 1):  # the first round warms both up and is dropped
            for name, (build, data, branches) in cases.items():
                times.setdefault((name, "engine"), []).append(
                    run_engine(build, data, branches))
                times.setdefault((name, "dask"), []).append(
                    run_dask(build, data, branches, client))
    kind = "processes" if args.processes else "threads"
    print(f"Dask vs ThreadedEngine, 2 workers each (Dask: {kind}), one BLAS thread, "
          f"medians of {args.repeats} interleaved repeats")
    print(f"  LocalCluster start: {start_up:.2f} s")
    print(f"  {'graph':18} {'tasks':>6} {'engine':>12} {'dask':>12} {'per task: engine':>18} "
          f"{'dask':>10} {'dask/engine':>12}")
    for name, (build, data, branches) in cases.items():
        tasks = len(hdask.to_dask(build(mx.sym, mx.sym.var("x"), branches), {"x": data}).ops)
        e, d = (statistics.median(times[(name, s)][1:]) for s in ("engine", "dask"))
        print(f"  {name:18} {tasks:6d} {e * 1e3:9.2f} ms {d * 1e3:9.2f} ms "
              f"{e / tasks * 1e6:15.1f} us {d / tasks * 1e6:7.1f} us {d / e:11.1f}x")


if __name__ == "__main__":
    main()
