"""How long does the first call of a hybridized chain take, as the chain grows?

Run from the repository root: ``python benchmarks/compile_time.py [--quick] [--png FILE]``.
A HybridBlock applies ``relu`` N times; its first call traces the chain, runs the pass
pipeline, generates and compiles the program and runs it once. Every step must be
O(nodes + edges): the first call should grow linearly with N.

* B (now): ``ir.rebuild`` walks only the nodes a visit made, stopping at nodes already
  emitted, so a pass over the graph walks each node once.
* A (before): the old ``ir.rebuild``, copied below, which ran a full toposort of each
  new node's ancestry for every node: O(N^2). It is run only for small N (at 2 000 it
  already takes seconds); A and B alternate at the same N in one run.

Targets: B's first call on a 10 000-node chain <= 2 s and on a 100 000-node chain <= 20 s.
Each first call runs in a fresh process (as a user's does). Prints a table (medians of
REPEAT runs for N <= 10 000, one run above) and saves a log-log
plot of time vs N (default ``benchmarks/compile_time.png``). Timings vary with the machine
and its load: compare A and B within one run, and the slope.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hybridlab import nd  # noqa: E402
from hybridlab.gluon import nn  # noqa: E402
from hybridlab.graph import ir  # noqa: E402

SIZES = (500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000)
QUICK_SIZES = (500, 1000, 2000, 5000, 10_000)
OLD_SIZES = (500, 1000, 2000)  # the quadratic rebuild: 2 000 nodes take ~10 s already
REPEAT = 3
TARGETS = {10_000: 2.0, 100_000: 20.0}


class Chain(nn.HybridBlock):
    def __init__(self, length: int) -> None:
        super().__init__()
        self.length = length

    def hybrid_forward(self, F, x):  # noqa: N803 -- Gluon's name for the namespace
        for _ in range(self.length):
            x = F.relu(x)
        return x


def _old_rebuild(graph: ir.Graph, visit: ir.Visit) -> ir.Graph:
    """``ir.rebuild`` as it was before: a toposort of the whole ancestry per node."""
    mapping: dict[int, tuple[ir.Value, ...]] = {}
    new_nodes: list[ir.Node] = []
    emitted: set[int] = set()
    for node in graph.nodes:
        new_inputs = tuple(mapping[id(v.node)][v.index] for v in node.inputs)
        result = visit(node, new_inputs)
        values = (tuple(result.out(i) for i in range(result.num_outputs))
                  if isinstance(result, ir.Node) else tuple(result))
        for fresh in ir.toposort(v.node for v in values):
            if id(fresh) not in emitted:
                emitted.add(id(fresh))
                new_nodes.append(fresh)
        mapping[id(node)] = values
    outputs = tuple(mapping[id(v.node)][v.index] for v in graph.outputs)
    inputs = tuple(mapping[id(n)][0].node for n in graph.inputs)
    return ir.Graph(tuple(new_nodes), inputs, outputs)


@contextlib.contextmanager
def old_rebuild() -> Iterator[None]:
    """Swap the old rebuild in wherever a pass imported it, then put the new one back."""
    import importlib
    modules = [ir] + [importlib.import_module(f"hybridlab.graph.passes.{name}") for name in (
        "fold_constants", "eliminate_common_subexpressions", "eliminate_dead_code",
        "fuse_elementwise", "plan_memory")]
    patched = [m for m in modules if getattr(m, "rebuild", None) is ir.rebuild]
    new = ir.rebuild
    for module in patched:
        module.rebuild = _old_rebuild
    try:
        yield
    finally:
        for module in patched:
            module.rebuild = new


def first_call(length: int) -> float:
    """Seconds for the first call (trace + passes + codegen + one run) of a fresh chain."""
    import warnings
    net = Chain(length)
    net.hybridize()
    x = nd.ones((4,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the hybridization report about the loop
        start = time.perf_counter()
        net(x).wait_to_read()
        return time.perf_counter() - start


def first_call_in_child(length: int, old: bool) -> float:
    """``first_call`` in a fresh process: what a user's first call meets, and no garbage
    from the previous (larger) graphs for the collector to walk."""
    command = [sys.executable, __file__, "--one", str(length)] + (["--old"] if old else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def measure(sizes: tuple[int, ...]) -> list[tuple[int, float, float | None]]:
    rows = []
    for length in sizes:
        runs = REPEAT if length <= 10_000 else 1
        new, old = [], []
        for _ in range(runs):  # A and B alternate at the same N
            new.append(first_call_in_child(length, old=False))
            if length in OLD_SIZES:
                old.append(first_call_in_child(length, old=True))
        row = (length, statistics.median(new), statistics.median(old) if old else None)
        rows.append(row)
        _print_row(*row)
    return rows


def _print_row(length: int, new: float, old: float | None) -> None:
    target = TARGETS.get(length)
    verdict = "" if target is None else (f"target <= {target:.0f} s: "
                                         + ("met" if new <= target else "MISSED"))
    before = "" if old is None else f"{old:9.3f} s  {old / new:6.1f}x"
    print(f"{length:>8}  {new:9.3f} s  {new / length * 1e6:8.1f} us  {before:<22} {verdict}",
          flush=True)


def plot(rows: list[tuple[int, float, float | None]], fname: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=110)
    sizes = [r[0] for r in rows]
    axes.loglog(sizes, [r[1] for r in rows], "o-", color="#0072B2",
                label="B: one walk per graph (now)")
    old = [(r[0], r[2]) for r in rows if r[2] is not None]
    if old:
        axes.loglog(*zip(*old), "s--", color="#D55E00", label="A: a toposort per node (before)")
    first = rows[0]
    axes.loglog(sizes, [first[1] * n / first[0] for n in sizes], ":", color="#999999",
                label="linear in N (through the first B point)")
    for length, target in TARGETS.items():
        if length in sizes:
            axes.plot([length], [target], "v", color="#009E73", markersize=9)
    axes.plot([], [], "v", color="#009E73", label="target")
    axes.set_xlabel("nodes in the chain (N)")
    axes.set_ylabel("first call: trace + passes + codegen + run (s)")
    axes.set_title("Compile time of a relu chain")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="upper left", fontsize=9)
    figure.tight_layout()
    figure.savefig(fname)
    print(f"plot: {fname}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N up to 10 000 only")
    parser.add_argument("--png", default=str(Path(__file__).with_suffix(".png")))
    parser.add_argument("--one", type=int, help="(internal) time one first call, print it")
    parser.add_argument("--old", action="store_true", help="(internal) with the old rebuild")
    args = parser.parse_args()
    if args.one:
        with old_rebuild() if args.old else contextlib.nullcontext():
            print(first_call(args.one))
        return
    print(f"{'N':>8}  {'B (now)':>11}  {'per node':>11}  {'A (before)':>11}  {'A/B':>7}")
    rows = measure(QUICK_SIZES if args.quick else SIZES)
    plot(rows, args.png)


if __name__ == "__main__":
    main()
