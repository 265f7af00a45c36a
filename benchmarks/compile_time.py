"""How compile time grows with the graph: a chain of N relu nodes, first call of a CachedOp.

The first call infers shapes, runs every pass and generates and compiles the Python
source; every step is meant to be O(nodes + edges). Measured for N = 1 000 .. 100 000:
the seconds of the first call, the microseconds per node (flat when the growth is
linear), and a log-log plot saved to ``build/compile_time.png``. Targets: 10 000 nodes
<= 2 s, 100 000 nodes <= 20 s.

    python3 benchmarks/compile_time.py [--sizes 1000 3000 10000 30000 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hybridlab import ndarray as nd
from hybridlab import symbol as sym
from hybridlab.graph.cached_op import CachedOp

TARGETS = {10_000: 2.0, 100_000: 20.0}


def first_call(n: int) -> float:
    y = sym.var("x")
    for _ in range(n):
        y = sym.relu(y)
    op = CachedOp(y)
    start = time.perf_counter()
    op(nd.ones((2, 2))).wait_to_read()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[1000, 3000, 10_000, 30_000, 100_000])
    args = parser.parse_args()
    print("first call of a CachedOp on a chain of N relu nodes (shape inference, passes, "
          "code generation)")
    print(f"  {'N':>8} {'seconds':>9} {'us per node':>12}  target")
    times = []
    for n in args.sizes:
        seconds = first_call(n)
        times.append(seconds)
        target = TARGETS.get(n)
        verdict = "" if target is None else (f"<= {target:g} s "
                                             f"{'met' if seconds <= target else 'MISSED'}")
        print(f"  {n:8d} {seconds:9.2f} {seconds / n * 1e6:12.1f}  {verdict}", flush=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 3.4), layout="constrained")
    axes.loglog(args.sizes, times, "o-", label="measured")
    scale = times[0] / args.sizes[0]
    axes.loglog(args.sizes, [scale * n for n in args.sizes], ":", color="#999999",
                label="linear from the first point")
    axes.set(xlabel="nodes in the chain (N)", ylabel="first call (s)",
             title="compile time against graph size")
    axes.legend(fontsize=8)
    os.makedirs("build", exist_ok=True)
    figure.savefig("build/compile_time.png", dpi=100)
    print("  plot: build/compile_time.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
