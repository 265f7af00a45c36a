"""Does the ThreadedEngine find the parallelism in a program by itself?

Two independent chains of 10 matrix products (1024x1024 float32) are pushed in program
order, interleaved. Nothing tells the engine they are independent: it sees only that
chain A's ops read and write chain A's Vars and chain B's ops chain B's. With two
workers it runs them at the same time. The reference is the same work done by hand:
two plain Python threads versus one thread.

BLAS runs one thread per worker in every row, so that the comparison is about the
engine's workers, not BLAS's own threads: the 2-worker engine rows rely on the engine's
own limit (NOTE [BLAS threads] in engine.py: one BLAS thread while it is busy), the other
rows are limited by hand (threadpoolctl); each row says which. After the table and the
speed-ups, one line gives numpy serial with BLAS's default threading for scale; the last
lines give the BLAS thread count seen inside a 2-worker engine op and after ``wait_all``,
and the 2-worker run's average parallelism from its trace. Medians of interleaved
repeats, one run.

The script re-runs itself without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE if they are set
(they can pin OpenBLAS to a slower kernel); it prints the BLAS kernel in use.

    python3 benchmarks/engine_parallel.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab import engine

try:
    from hybridlab import ndarray as nd
except ImportError:  # the engine rows (numpy closures pushed directly) still run
    nd = None

N, LENGTH = 1024, 10
_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def reexec_without_blas_overrides() -> None:
    if any(name in os.environ for name in _OVERRIDES):
        env = {k: v for k, v in os.environ.items() if k not in _OVERRIDES}
        print(f"re-running without {', '.join(n for n in _OVERRIDES if n in os.environ)}")
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def make_chains() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((N, N), dtype=np.float32),
             (rng.standard_normal((N, N), dtype=np.float32) / np.sqrt(N)).astype(np.float32))
            for _ in range(2)]


def run_chain(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    for _ in range(LENGTH):
        x = x @ w
    return x


def serial(chains) -> list[np.ndarray]:
    return [run_chain(x, w) for x, w in chains]


def plain_threads(chains) -> list[np.ndarray]:
    results: list = [None, None]

    def work(index: int) -> None:
        results[index] = run_chain(*chains[index])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def on_engine(eng: engine.Engine, chains) -> list[np.ndarray]:
    """Push both chains in program order (interleaved); the engine finds the parallelism."""
    buffers = [x for x, _ in chains]
    variables = [engine.Var(f"x{c}") for c in range(2)]
    weights = [engine.Var(f"w{c}") for c in range(2)]
    for _ in range(LENGTH):
        for chain in range(2):
            def product(chain: int = chain) -> None:
                buffers[chain] = buffers[chain] @ chains[chain][1]
            eng.push(product, [variables[chain], weights[chain]], [variables[chain]], "dot")
    eng.wait_all()
    return buffers


def with_nd_dot(eng: engine.Engine, chains) -> list[np.ndarray]:
    """The same program written as a user would: ``x = nd.dot(x, w)`` on NDArrays."""
    with engine.engine_scope(eng):
        xs = [nd.from_numpy(x) for x, _ in chains]
        ws = [nd.from_numpy(w) for _, w in chains]
        for _ in range(LENGTH):
            xs = [nd.dot(x, w) for x, w in zip(xs, ws)]
        return [x.asnumpy() for x in xs]


def traced_parallelism(eng: engine.Engine, chains) -> float:
    """How many ops ran at once on average: a load-independent check of the schedule."""
    eng.clear_trace()
    eng.set_tracing(True)
    on_engine(eng, chains)
    eng.set_tracing(False)
    records = list(eng.trace)
    span = max(r.end for r in records) - min(r.start for r in records)
    return sum(r.end - r.start for r in records) / span


def blas_threads() -> int:
    """The number of threads BLAS would use now; 0 when threadpoolctl finds no BLAS."""
    from threadpoolctl import threadpool_info
    return max((lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"),
               default=0)


def blas_threads_inside_and_after(eng: engine.Engine) -> tuple[int, int]:
    """BLAS threads seen by an op on ``eng`` while it runs, and after ``wait_all``."""
    seen: list[int] = []
    eng.push(lambda: seen.append(blas_threads()), [], [engine.Var()], "probe")
    eng.wait_all()
    return seen[0], blas_threads()


def timed(fn, *args) -> tuple[float, list[np.ndarray]]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    reexec_without_blas_overrides()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (other processes share the cores)")
    from threadpoolctl import threadpool_info, threadpool_limits
    for lib in threadpool_info():
        print(f"BLAS: {lib['internal_api']} {lib.get('version')} kernel "
              f"{lib.get('architecture')} threading {lib.get('threading_layer')} "
              f"default threads {lib['num_threads']}; cores {os.cpu_count()}")
    chains = make_chains()
    one, two = engine.ThreadedEngine(1), engine.ThreadedEngine(2)
    # name -> (what to time, whether the engine limits BLAS itself: the 2-worker rows rely
    # on NOTE [BLAS threads]; every other row is limited to 1 BLAS thread by hand)
    rows = {"numpy serial (1 thread)": (lambda: serial(chains), False),
            "two plain Python threads": (lambda: plain_threads(chains), False),
            "ThreadedEngine, 1 worker": (lambda: on_engine(one, chains), False),
            "ThreadedEngine, 2 workers": (lambda: on_engine(two, chains), True)}
    if nd is not None:
        rows["nd.dot, 1 worker"] = (lambda: with_nd_dot(one, chains), False)
        rows["nd.dot, 2 workers"] = (lambda: with_nd_dot(two, chains), True)
    times: dict[str, list[float]] = {name: [] for name in rows}
    expected = serial(chains)
    for _ in range(repeats):
        for name, (fn, engine_limits) in rows.items():
            by_hand = not engine_limits
            with threadpool_limits(1, user_api="blas") if by_hand else contextlib.nullcontext():
                seconds, result = timed(fn)
            times[name].append(seconds)
            assert all(np.array_equal(a, b) for a, b in zip(result, expected)), name
    parallelism = traced_parallelism(two, chains)
    inside, after = blas_threads_inside_and_after(two)
    default_blas = [timed(serial, chains)[0] for _ in range(repeats)]
    one.close()
    two.close()
    report(times, default_blas, repeats)
    print(f"BLAS threads inside a 2-worker engine op: {inside}; after wait_all: {after}")
    print(f"average parallelism of the 2-worker run (busy time of all ops / wall span, from "
          f"the trace): {parallelism:.2f} -- 2.0 means both workers were always running an "
          "op; the speed-up can reach it only if the machine has two idle cores")


def report(times: dict[str, list[float]], default_blas: list[float], repeats: int) -> None:
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["numpy serial (1 thread)"]
    print(f"\n2 chains x {LENGTH} products of {N}x{N} float32, median of {repeats} "
          "(BLAS: 1 thread per worker)")
    print(f"{'':28}{'median ms':>10}{'speed-up vs serial':>20}")
    for name, median in medians.items():
        print(f"{name:28}{median * 1e3:10.1f}{base / median:20.2f}")
    print("\nspeed-ups (ratio of medians; median of the per-repeat ratios, which cancels "
          "slow drifts in machine load):")
    pairs = [("ThreadedEngine 2 workers vs 1 worker (target >= 1.75x)",
              "ThreadedEngine, 1 worker", "ThreadedEngine, 2 workers"),
             ("two plain Python threads vs serial (the reference)",
              "numpy serial (1 thread)", "two plain Python threads"),
             ("nd.dot program, 2 workers vs 1 worker", "nd.dot, 1 worker", "nd.dot, 2 workers")]
    for label, slow, fast in pairs:
        if fast in times:
            paired = statistics.median(a / b for a, b in zip(times[slow], times[fast]))
            print(f"  {label:56}{medians[slow] / medians[fast]:6.2f}x{paired:7.2f}x")
    print(f"for scale, numpy serial with BLAS's default threads: "
          f"{statistics.median(default_blas) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
