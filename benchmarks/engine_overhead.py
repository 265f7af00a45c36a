"""What does one engine op cost, compared with calling numpy directly?

For a tiny array (1x16 float32) the work is nothing, so the time per op *is* the
overhead: numpy's own ``np.add`` (the floor), ``engine.push`` of a numpy closure (the
engine alone), and ``a + b`` on NDArrays (registry dispatch + shape rule + NDArray +
engine), under each engine. For the lazy engines "push" is the time the caller's loop
takes (what the user waits for while the workers run behind), "total" includes
``wait_all``, "cpu" is the CPU time of all threads per op (less sensitive than wall
time to other processes sharing the cores), and "switches" counts the process's thread
switches per op (getrusage): well above 0.1 means threads are handing the GIL to each
other on every op, NOTE [finishing without waiting] in engine.py. Medians of
interleaved repeats, measured side by side in one run.

    python3 benchmarks/engine_overhead.py [--ops 20000] [--repeats 7] [--profile]

``--profile`` prints a cProfile of ``a + b`` on the NaiveEngine (where the time goes).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab import engine

try:
    from hybridlab import ndarray as nd
except ImportError:  # the engine rows still run
    nd = None

ENGINES = {"NaiveEngine": lambda: engine.NaiveEngine(),
           "ThreadedEngine(2)": lambda: engine.ThreadedEngine(2),
           "ThreadedEngine(1)": lambda: engine.ThreadedEngine(1),
           "StepEngine": lambda: engine.StepEngine()}


Times = tuple[float, float, float, float]  # push, total, cpu seconds; thread switches


def switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def numpy_loop(n_ops: int) -> Times:
    x, y = np.ones((1, 16), np.float32), np.ones((1, 16), np.float32)
    start, cpu, before = time.perf_counter(), time.process_time(), switches()
    for _ in range(n_ops):
        np.add(x, y)
    seconds = time.perf_counter() - start
    return seconds, seconds, time.process_time() - cpu, switches() - before


def push_loop(eng: engine.Engine, n_ops: int) -> Times:
    x, y, out = np.ones((1, 16), np.float32), np.ones((1, 16), np.float32), {}
    a, b, c = engine.Var("a"), engine.Var("b"), engine.Var("c")

    def add() -> None:
        out["c"] = np.add(x, y)
    start, cpu, before = time.perf_counter(), time.process_time(), switches()
    for _ in range(n_ops):
        eng.push(add, (a, b), (c,), "add")
    pushed = time.perf_counter()
    eng.wait_all()
    return (pushed - start, time.perf_counter() - start, time.process_time() - cpu,
            switches() - before)


def ndarray_loop(eng: engine.Engine, n_ops: int) -> Times:
    with engine.engine_scope(eng):
        a, b = nd.ones((1, 16)), nd.ones((1, 16))
        eng.wait_all()
        start, cpu, before = time.perf_counter(), time.process_time(), switches()
        for _ in range(n_ops):
            a + b
        pushed = time.perf_counter()
        eng.wait_all()
        return (pushed - start, time.perf_counter() - start, time.process_time() - cpu,
                switches() - before)


def measure(n_ops: int, repeats: int) -> dict[str, list[Times]]:
    engines = {name: make() for name, make in ENGINES.items()}
    rows: dict = {"numpy np.add": lambda: numpy_loop(n_ops)}
    for name, eng in engines.items():
        rows[f"engine.push  {name}"] = lambda eng=eng: push_loop(eng, n_ops)
    if nd is not None:
        for name, eng in engines.items():
            rows[f"a + b        {name}"] = lambda eng=eng: ndarray_loop(eng, n_ops)
    times: dict[str, list[Times]] = {name: [] for name in rows}
    for _ in range(repeats):
        for name, fn in rows.items():
            times[name].append(fn())
            engines["StepEngine"].clear()  # its finished tasks would slow the GC for all rows
    for eng in engines.values():
        eng.close()
    return times


def report(times: dict[str, list[Times]], n_ops: int, repeats: int) -> None:
    def median_us(name: str, which: int) -> float:
        return statistics.median(t[which] for t in times[name]) / n_ops * 1e6
    floor = median_us("numpy np.add", 0)
    print(f"per-op time, (1,16) float32 add, {n_ops} ops, median of {repeats}")
    print(f"{'':32}{'push µs':>9}{'total µs':>10}{'cpu µs':>8}{'switches':>10}"
          f"{'push - numpy':>14}{'x numpy':>9}")
    for name in times:
        push, total, cpu = median_us(name, 0), median_us(name, 1), median_us(name, 2)
        per_op = median_us(name, 3) / 1e6  # thread switches per op
        print(f"{name:32}{push:9.2f}{total:10.2f}{cpu:8.2f}{per_op:10.3f}"
              f"{push - floor:14.2f}{push / floor:9.1f}")
    if nd is None:
        print("(hybridlab.ndarray not importable: only the engine rows were measured)")
        return
    above = median_us("a + b        NaiveEngine", 0) - floor
    threaded = median_us("a + b        ThreadedEngine(2)", 0)
    print("targets (this run):")
    print(f"  NaiveEngine a + b <= 3 µs above numpy: {above:.2f} µs, {verdict(above <= 3)}")
    print(f"  ThreadedEngine(2) a + b push <= 15 µs: {threaded:.2f} µs, "
          f"{verdict(threaded <= 15)}")


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def profile_naive(n_ops: int) -> None:
    with engine.engine_scope("NaiveEngine"):
        a, b = nd.ones((1, 16)), nd.ones((1, 16))
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(n_ops):
            a + b
        profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    report(measure(args.ops, args.repeats), args.ops, args.repeats)
    if args.profile and nd is not None:
        profile_naive(args.ops)


if __name__ == "__main__":
    main()
