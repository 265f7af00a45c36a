"""Measured time: what hybridize saves, and where one forward call's time goes.

What this module teaches
------------------------
Hybridizing removes per-layer Python work; it cannot make numpy's matrix products
faster. So the gain is large when the network is deep and the batch small (overhead
dominates) and shrinks as arithmetic grows. :func:`measure_speedup` times three things
side by side: the network run imperatively, hybridized, and the same arithmetic written
directly in numpy -- the *floor*: the kernels alone, with no framework around them.
:func:`where_time_goes` then peels one hybridized call like an onion, from the inside
out: every kernel alone, what the generated function adds, what the CachedOp call with
its engine push adds, what the block call adds; and the imperative call beside it.

NOTE [A fair floor]: everything is measured under one protocol, so that only the work
*around* the kernels differs (lesson 00, "How the course measures", explains it to
students). It all runs with one BLAS thread (threadpoolctl) and the framework on the
naive engine, which runs every operation at once on the calling thread, as the numpy
floor does: with a worker thread, the engine would run the next call's Python while the
worker computes the last one (lesson 03's front end and back end), and could beat a numpy
loop on one thread, which says nothing about overhead. Rounds of the variants are
interleaved (in rotating order) and each result is the median round, so a burst of load
on a shared machine hits all of them alike; within a round the fastest of three runs
counts (:func:`time_round`), so a run interrupted by another program does not. When the
kernels dominate, hybridized and floor run the same kernels, so their ratio is 1 within
the noise of the machine. The floor keeps the framework's weight
layout, ``(out, in)`` read transposed; a compiled program may come in *below* it when
its kernels are called more cheaply than the floor's (a specialised kernel, a weight
already in the layout the product wants): the floor is numpy written plainly, not a
bound of physics.

Invariants
----------
* Timings are seconds (breakdowns) or microseconds per call (speed-ups); only the ratios
  mean something across machines.
* :class:`SpeedupModel` measures each (network, batch) once and keeps it, so an
  instrument's points accumulate. threadpoolctl is imported inside functions only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

BATCH_RANGE = (1, 1024)  # the speed-up instrument's slider limits, also used by the tests
BATCHES = (1, 4, 16, 64, 256, 1024)  # the batch slider's stops
SEED = "seed MLP 512-256-128-2"  # the seeds' network: Dense(256), Dense(128), Dense(2)
CUSTOM = "depth x Dense(width)"
WIDTH_RANGE = (16, 512)
DEPTH_RANGE = (1, 8)
OUTPUTS = 10  # units of the last Dense layer
PROTOCOL = "all three on the naive engine and 1 BLAS thread; medians of interleaved rounds"
LAYERS = ("generated function", "CachedOp call + engine push", "block call",
          "framework per operator")  # a breakdown's overhead segments, outermost last


@dataclass(frozen=True)
class Timing:
    """Microseconds per call of one network, three ways."""

    imperative_us: float
    hybridized_us: float
    numpy_us: float

    @property
    def speedup(self) -> float:
        return self.imperative_us / self.hybridized_us

    def __str__(self) -> str:
        return (f"imperative {self.imperative_us:8.1f} µs/call | hybridized "
                f"{self.hybridized_us:8.1f} µs/call | numpy floor {self.numpy_us:8.1f} µs/call"
                f" | speed-up x{self.speedup:.1f}")


def time_round(fn: Callable[[], Any], repeats: int, chunks: int = 3) -> float:
    """Seconds per call of ``repeats`` calls issued back to back: the fastest of ``chunks``
    runs of ``repeats // chunks`` calls, each synced once at its end.

    Like a training loop, the engine is synced once per run (``nd.waitall()``): waiting
    after every call would time the hand-over between threads, not the work. The fastest
    run counts, because a run during which the operating system gave the core to another
    program (a shared machine) measures that program, not this one.
    """
    from hybridlab import ndarray as nd

    fn()  # warm-up: after a switch to hybridized, the first call traces and compiles
    nd.waitall()
    calls, best = max(1, repeats // chunks), float("inf")
    for _ in range(chunks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        nd.waitall()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def make_mlp(width: int, depth: int, outputs: int = OUTPUTS) -> Any:
    """``depth`` ReLU Dense layers of ``width`` units and a Dense output layer."""
    return make_net((width,) * depth + (outputs,))


def make_net(units: tuple[int, ...]) -> Any:
    """ReLU Dense layers of ``units[:-1]`` units, then a Dense layer of ``units[-1]``."""
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    for size in units[:-1]:
        net.add(nn.Dense(size, activation="relu"))
    net.add(nn.Dense(units[-1]))
    net.initialize()
    return net


def network(name: str, width: int = 64, depth: int = 4) -> tuple[int, tuple[int, ...]]:
    """``(input features, units per layer)`` of the widget's two networks."""
    if name == SEED:
        return 512, (256, 128, 2)
    if name == CUSTOM:
        return width, (width,) * depth + (OUTPUTS,)
    raise ValueError(f"network {name!r}: choose {SEED!r} or {CUSTOM!r}")


def numpy_mlp(net: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The same network as plain numpy, as fast as numpy writes it: the floor. Products
    by ``np.dot``'s C function (NOTE [np.dot, not @] in ops/products.py; hybridlab's kernels
    call it too) into buffers made once per batch size, bias and relu added in place.
    The weights keep hybridlab's layout, ``(out, in)`` read transposed, and start at a
    64-byte boundary as the network's own do (NOTE [Aligned weights] in parameter.py).
    (The floor returns its own buffer, reused by the next call: fine for timing.)"""
    from hybridlab.gluon.parameter import aligned
    from hybridlab.ops.products import dot_c as dot

    layers = [(aligned(layer.weight.data().asnumpy()).T, aligned(layer.bias.data().asnumpy()))
              for layer in net]
    buffers: dict[int, list[np.ndarray]] = {}

    def forward(x: np.ndarray) -> np.ndarray:
        outs = buffers.get(len(x))
        if outs is None:
            outs = buffers[len(x)] = [np.empty((len(x), w.shape[1]), w.dtype) for w, _ in layers]
        for index, ((weight_t, bias), out) in enumerate(zip(layers, outs)):
            dot(x, weight_t, out=out)
            np.add(out, bias, out=out)
            if index < len(layers) - 1:  # relu after every layer but the last
                np.maximum(out, 0, out=out)
            x = out
        return x

    return forward


def measure_speedup(net: Any, x: Any, repeats: int = 50, rounds: int = 5) -> Timing:
    """Time ``net(x)`` imperatively and hybridized, and the numpy floor (for an MLP of
    Dense layers), under the protocol of NOTE [A fair floor]. Leaves ``net`` hybridized."""
    from threadpoolctl import threadpool_limits

    from hybridlab import engine

    with engine.engine_scope(engine.NaiveEngine()), \
            threadpool_limits(1, user_api="blas"):
        net.hybridize(active=False)
        net(x).wait_to_read()  # finishes deferred initialisation before numpy_mlp reads
        forward, array = numpy_mlp(net), x.asnumpy()
        variants: list[tuple[Callable[[], Any], Callable[[], Any]]] = [
                    (lambda: net.hybridize(active=False), lambda: net(x)),
                    (lambda: net.hybridize(), lambda: net(x)),
                    (lambda: None, lambda: forward(array))]
        samples: list[list[float]] = [[], [], []]
        for round_index in range(rounds):
            for offset in range(3):  # rotating order: no variant always goes first
                which = (round_index + offset) % 3
                switch, call = variants[which]
                switch()
                samples[which].append(time_round(call, repeats))
        net.hybridize()
    return Timing(*(statistics.median(s) * 1e6 for s in samples))


def speedup_point(batch_size: int, width: int, depth: int, repeats: int = 30) -> Timing:
    """Timings for a freshly made MLP with inputs of ``width`` features (seeded)."""
    return network_point(batch_size, width, (width,) * depth + (OUTPUTS,), repeats)


def network_point(batch_size: int, features: int, units: tuple[int, ...],
                  repeats: int = 30) -> Timing:
    """Timings for a freshly made network of ``units`` on ``features`` inputs (seeded)."""
    from hybridlab import ndarray as nd
    from hybridlab import random

    random.seed(0)
    net = make_net(units)
    x = nd.random.normal(shape=(batch_size, features))
    return measure_speedup(net, x, repeats)


def network_name(width: int, depth: int) -> str:
    return f"{depth} x Dense({width}) + Dense({OUTPUTS})"


class SpeedupModel:
    """The widget's measurements: one :class:`Timing` per (network, batch), measured once
    and kept, so that points accumulate and a setting seen before costs nothing.

    Large settings take long to time, so the number of calls per round shrinks with the
    arithmetic of one call (at least 2, at most ``repeats``): about a second per point.
    """

    def __init__(self, repeats: int = 30) -> None:
        self.repeats = repeats
        self.points: dict[tuple[str, int], Timing] = {}

    @staticmethod
    def name(network_kind: str, width: int, depth: int) -> str:
        return SEED if network_kind == SEED else network_name(width, depth)

    def calls_per_round(self, batch: int, features: int, units: tuple[int, ...]) -> int:
        sizes = (features, *units)
        flops = 2 * batch * sum(a * b for a, b in zip(sizes, sizes[1:]))
        seconds = flops / 2e10 + 60e-6  # one BLAS thread's speed, plus the call around it
        return max(2, min(self.repeats, int(1.0 / (15 * seconds))))

    def measure(self, network_kind: str, batch: int, width: int = 64, depth: int = 4
                ) -> Timing:
        key = (self.name(network_kind, width, depth), batch)
        if key not in self.points:
            features, units = network(network_kind, width, depth)
            self.points[key] = network_point(batch, features, units,
                                             self.calls_per_round(batch, features, units))
        return self.points[key]

    def series(self, name: str) -> list[tuple[int, Timing]]:
        """The measured points of one network, by batch size."""
        return sorted((batch, t) for (net, batch), t in self.points.items() if net == name)


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
    from hybridlab.lab.graphs import cached_op_of

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
        return float(statistics.median(o - i for o, i in zip(samples[outer], below)))

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
