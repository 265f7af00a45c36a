"""Where the time of one forward call goes: the kernels, and each layer around them.

What this module teaches
------------------------
A profiler sees a hybridized call as one ``CachedOp`` record, so it cannot say what the
call spends besides arithmetic. Here the call is *peeled* like an onion, each layer timed
on its own, from the inside out (NaiveEngine, one BLAS thread, medians of interleaved
rounds, as NOTE [A fair floor] in ``plots.py``):

1. every **kernel** of the compiled program, alone, on the inputs it really gets;
2. the **generated function** (the program's Python: the kernels plus the lines around
   them) -- what it adds to the kernels' sum;
3. the **CachedOp call**: finding the program for the signature, one result NDArray, one
   engine push -- what it adds to the function;
4. the **block call** ``net(x)``: the block's checks and its parameter list.

The imperative call runs the same kernels, one engine operation per operator; what it
adds to them is the framework's Python per operator (the layer's call, parameter reads,
dispatch, the engine push). :func:`where_time_goes` measures both;
``benchmarks/hybridize_mlp.py --profile`` prints the same numbers (one implementation).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from hybridlab.viz.palette import KIND_COLOURS, OKABE_ITO, OTHER_COLOUR

LAYERS = {  # the overhead segments, outermost last, and their colours
    "generated function": OKABE_ITO["yellow"],
    "CachedOp call + engine push": OKABE_ITO["orange"],
    "block call": OKABE_ITO["vermillion"],
    "framework per operator": OKABE_ITO["blue"],
}


@dataclass(frozen=True)
class Breakdown:
    """Seconds per call: each kernel (``(node, op, seconds)``), then what each layer
    around them adds (``(layer, seconds)``); ``total``, their sum, is the whole call."""

    label: str
    kernels: list[tuple[str, str, float]]  # (node name, operator, seconds)
    layers: list[tuple[str, float]]
    total: float

    def __str__(self) -> str:
        kernels = sum(t for *_, t in self.kernels)
        parts = ", ".join(f"{name} {t * 1e6:+.1f}" for name, t in self.layers)
        return (f"{self.label}: {self.total * 1e6:.1f} µs per call = kernels "
                f"{kernels * 1e6:.1f} ({len(self.kernels)} calls), {parts}")


def _per_call(run: Callable[[], Any], calls: int, chunks: int = 3) -> float:
    """Seconds per call: the fastest of ``chunks`` runs of ``calls // chunks`` calls (a run
    the operating system interrupted for another program does not count)."""
    best, each = float("inf"), max(1, calls // chunks)
    for _ in range(chunks):
        start = time.perf_counter()
        for _ in range(each):
            run()
        best = min(best, (time.perf_counter() - start) / each)
    return best


def where_time_goes(net: Any, x: Any, calls: int = 200, rounds: int = 5
                    ) -> tuple[Breakdown, Breakdown]:
    """(hybridized, imperative) breakdowns of ``net(x)`` for a HybridBlock; leaves ``net``
    hybridized."""
    from threadpoolctl import threadpool_limits

    from hybridlab import engine
    from hybridlab import ndarray as nd
    from hybridlab.viz.graph import cached_op_of

    with engine.engine_scope(engine.NaiveEngine()), threadpool_limits(1, user_api="blas"):
        net.hybridize()
        net(x).wait_to_read()
        op = cached_op_of(net)
        program = op.last_program
        arrays = op.arguments([x.asnumpy()])  # x, the parameters (and layout copies)
        function = program.function
        steps = _kernel_steps(program.graph, arrays)

        runs: dict[str, Callable[[], Any]] = {
            "function": lambda: function(*arrays),
            "cached_op": lambda: op(x),
        }
        samples: dict[str, list[float]] = {name: [] for name in [*runs, "block", "imperative"]}
        kernel_samples: list[list[float]] = [[] for _ in steps]
        for _ in range(rounds):  # interleaved rounds: drift hits every layer alike
            for k, (_, _, kernel) in enumerate(steps):
                kernel_samples[k].append(_per_call(kernel, calls))
            for name, run in runs.items():
                samples[name].append(_per_call(run, calls))
                nd.waitall()
            for mode, name in ((True, "block"), (False, "imperative")):
                net.hybridize(mode)  # (a switch forgets the program: one call, untimed)
                net(x).wait_to_read()
                samples[name].append(_per_call(lambda: net(x), calls))
                nd.waitall()
        net.hybridize()
        net(x).wait_to_read()
    kernels = [(node, op_name, statistics.median(values))
               for (node, op_name, _), values in zip(steps, kernel_samples)]
    sums = [sum(round_values) for round_values in zip(*kernel_samples)]

    def added(outer: str, inner: str | None) -> float:
        """The median over rounds of what ``outer`` adds to ``inner`` *in the same round*:
        paired differences, so a slow round cancels out."""
        below = sums if inner is None else samples[inner]
        return statistics.median(o - i for o, i in zip(samples[outer], below))

    hybridized = Breakdown("hybridized", kernels, [
        ("generated function", added("function", None)),
        ("CachedOp call + engine push", added("cached_op", "function")),
        ("block call", added("block", "cached_op"))], 0.0)
    imperative = Breakdown("imperative", kernels, [
        ("framework per operator", added("imperative", None))], 0.0)
    return tuple(  # type: ignore[return-value]
        Breakdown(b.label, b.kernels, b.layers,
                  sum(t for *_, t in b.kernels) + sum(t for _, t in b.layers))
        for b in (hybridized, imperative))


def _kernel_steps(graph: Any, arrays: list[Any]) -> list[tuple[str, str, Callable[[], Any]]]:
    """Each operator node of the compiled graph as a call of its kernel, as the generated
    code calls it (the specialised kernel when there is one, a fused group's steps in one
    buffer), on the arrays it receives in a real run (computed once, in order)."""
    from hybridlab.graph.ir import interpret
    from hybridlab.ops.fused import FUSED, run_fused
    from hybridlab.ops.registry import RunContext

    context = RunContext(False, None)
    return [(node.name, str(node.op), _kernel_call(node, args, context, FUSED, run_fused))
            for node, args in interpret(graph, arrays, context)]


def _kernel_call(node: Any, args: list[Any], context: Any, fused: str,
                 run_fused: Callable[..., Any]) -> Callable[[], Any]:
    attrs = node.attr_dict
    if node.op == fused:
        return lambda: run_fused(*args, program=attrs["program"])
    opdef = node.opdef
    special = getattr(opdef.kernel, "specialise", None)
    if special is not None and not opdef.needs_context:
        function = special([v.aval for v in node.inputs], False, **attrs)
        if function is not None:
            return lambda: function(*args)
    kernel, extra = opdef.kernel, ({"rt": context} if opdef.needs_context else {})
    return lambda: kernel(*args, **attrs, **extra)


def breakdown_figure(panels: dict[str, list[tuple[str, Breakdown]]]) -> Any:
    """One panel per entry (e.g. per batch size, each with its own time axis), one
    stacked bar per ``(label, breakdown)``: the kernels (filled by operator kind), then
    each layer around them (hatched); microseconds per call."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from hybridlab.viz.gantt import op_kind

    bars = max(len(rows) for rows in panels.values())
    figure, axes_list = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 1.2 + 0.5 *
                                     bars), layout="constrained", squeeze=False)
    every = [b for rows in panels.values() for _, b in rows]
    for axes, (title, rows) in zip(axes_list[0], panels.items()):
        for row, (_, breakdown) in enumerate(rows):
            left = 0.0
            for _, op_name, seconds in breakdown.kernels:
                axes.barh(row, seconds * 1e6, left=left, height=0.6, edgecolor="white",
                          linewidth=0.5,
                          color=KIND_COLOURS.get(op_kind(op_name), OTHER_COLOUR))
                left += seconds * 1e6
            for name, seconds in breakdown.layers:
                width = max(seconds, 0.0) * 1e6  # a layer measured as free adds nothing
                axes.barh(row, width, left=left, height=0.6, color=LAYERS[name],
                          hatch="///", edgecolor="white", linewidth=0.5)
                left += width
            axes.text(left, row, f" {breakdown.total * 1e6:.0f} µs", va="center", fontsize=8)
        axes.set_yticks(range(len(rows)), [label for label, _ in rows])
        axes.invert_yaxis()
        axes.margins(x=0.18)
        axes.set_title(title, fontsize=10)
        axes.set_xlabel("µs per forward call")
    kinds = sorted({op_kind(o) for b in every for _, o, _ in b.kernels})
    handles = [Patch(color=KIND_COLOURS.get(k, OTHER_COLOUR), label=f"kernels: {k}")
               for k in kinds]
    handles += [Patch(facecolor=colour, hatch="///", edgecolor="white", label=name)
                for name, colour in LAYERS.items()
                if any(name == n for b in every for n, _ in b.layers)]
    figure.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=7,
                  frameon=False)
    return figure
