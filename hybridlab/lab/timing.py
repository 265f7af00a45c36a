"""Measured time: the course's one protocol, what hybridize saves, and where a call's time goes.

What this module teaches
------------------------
Every timing of the course goes through :func:`measure`, the protocol of lesson 00's "How
the course measures" written once: one engine, named in the result; BLAS (and PyTorch,
when loaded) on a fixed number of threads; the ways being compared in interleaved rounds;
in each round the fastest of three runs, and the median of the rounds.
``tests/test_timing_protocol.py`` fails on a lesson that times anything another way.

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
counts (:func:`measure`), so a run interrupted by another program does not. When the
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

import contextlib
import inspect
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

BATCH_RANGE = (1, 1024)  # the speed-up instrument's slider limits, also used by the tests
BATCHES = (1, 4, 16, 64, 256, 1024)  # the batch slider's stops
SEED = "seed MLP 512-256-128-2"  # the seeds' network: Dense(256), Dense(128), Dense(2)
CUSTOM = "depth x Dense(width)"
WIDTH_RANGE = (16, 512)
DEPTH_RANGE = (1, 8)
OUTPUTS = 10  # units of the last Dense layer
PROTOCOL = "naive engine, 1 BLAS thread; interleaved rounds: fastest of 3 runs, median round"
LAYERS = ("generated function", "CachedOp call + engine push", "block call",
          "framework per operator")  # a breakdown's overhead segments, outermost last


RUNS = 3  # runs per way in a round; the fastest counts
STATISTIC = f"in each round the fastest of {RUNS} runs, the median of the rounds"


class Laps:
    """A stopwatch for parts of one call: a way that takes an argument gets one, and
    ``with laps("push"): ...`` adds that block's time to the lap ``push``."""

    def __init__(self, timer: Callable[[], float]) -> None:
        self.timer = timer
        self.totals: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = self.timer()
        try:
            yield
        finally:
            self.totals[name] = self.totals.get(name, 0.0) + self.timer() - start


@dataclass(frozen=True)
class Measurement:
    """Seconds per call of each way, one sample per round (the fastest run of the round),
    measured by :func:`measure`; ``m[way]`` is the median round."""

    engine: str
    threads: int | None
    runs: int
    samples: dict[str, list[float]]
    laps: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def __getitem__(self, way: str) -> float:
        return statistics.median(self.samples[way])

    @property
    def seconds(self) -> dict[str, float]:
        return {way: self[way] for way in self.samples}

    def ratio(self, way: str, other: str) -> float:
        """``way``'s median over ``other``'s."""
        return self[way] / self[other]

    def difference(self, way: str, other: str) -> float:
        """The median over rounds of ``way - other`` within each round: the two ran side by
        side, so a slow round slows both and cancels out."""
        return statistics.median(a - b for a, b in zip(self.samples[way], self.samples[other]))

    def lap(self, way: str, name: str) -> float:
        """A lap's seconds per call, the median over rounds (of each round's fastest run)."""
        return statistics.median(self.laps[way][name])

    @property
    def protocol(self) -> str:
        threads = "BLAS threads as found" if self.threads is None else (
            f"{self.threads} BLAS thread{'s' if self.threads > 1 else ''}")
        rounds = len(next(iter(self.samples.values()), []))
        return (f"{self.engine}, {threads}, {rounds} interleaved rounds, in each round the "
                f"fastest of {self.runs} runs, the median of the rounds")

    def __str__(self) -> str:
        width = max(map(len, self.samples))
        lines = [f"{way:>{width}}: {self[way] * 1e6:9.1f} µs per call" for way in self.samples]
        return "\n".join([*lines, f"({self.protocol})"])


def describe(engine: Any) -> str:
    """An engine named for a reader: "the naive engine", "a threaded engine, 2 workers"."""
    workers = getattr(engine, "workers", None)
    if type(engine).__name__ == "NaiveEngine":
        return "the naive engine"
    if workers is not None:
        return f"a threaded engine, {workers} worker{'s' if workers > 1 else ''} per device"
    return type(engine).__name__


def measure(ways: dict[str, Callable[..., Any]], *, engine: Any = "NaiveEngine",
            threads: int | None = 1, rounds: int = 5, calls: int = 100, runs: int = RUNS,
            sync: bool = True, switches: dict[str, Callable[[], Any]] | None = None,
            timer: Callable[[], float] = time.perf_counter) -> Measurement:
    """Time every way by the course's one protocol (lesson 00, "How the course measures").

    * ``engine``: the engine every way runs on (a name or an engine; named in the result),
      or ``{way: engine}`` when the engines are what is compared (one worker or two);
    * ``threads``: BLAS threads (threadpoolctl), and PyTorch's when it is loaded (None:
      leave them as they are, for a measurement *of* threads);
    * ``rounds`` interleaved rounds, the ways in rotating order, so a burst of load from
      another program hits every way alike;
    * in each round, ``runs`` runs of ``calls`` calls per way, each run synced once at its
      end as a training loop would (``sync``: ``nd.waitall()``, and a JAX result's
      ``block_until_ready()``); the fastest run counts, since a run the operating system
      interrupted for another program measures that program;
    * the median round is the result (:class:`Measurement`).

    Before each round of a way, ``switches[way]()`` runs and one untimed call warms it up
    (a first hybridized or jitted call compiles). A way taking one argument gets a
    :class:`Laps`, to time its parts. ``timer`` is injectable, so tests can pass a clock
    that gives the same verdict on every machine."""
    from threadpoolctl import threadpool_limits

    from hybridlab import engine as engines

    if not ways or min(rounds, calls, runs) < 1:
        raise ValueError(f"measure needs at least one way and rounds, calls and runs of at "
                         f"least 1; got {len(ways)} way(s), rounds={rounds}, calls={calls}, "
                         f"runs={runs}")
    names = list(ways)
    chosen = {name: _engine_of(engine[name] if isinstance(engine, dict) else engine)
              for name in names}
    samples: dict[str, list[float]] = {name: [] for name in names}
    laps: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    for round_index in range(rounds):
        for offset in range(len(names)):
            name = names[(round_index + offset) % len(names)]
            # the threads are set anew for every round: an engine that changes BLAS's
            # threads while its workers are busy must not carry that into another way
            with engines.engine_scope(chosen[name]), _limit_threads(threads, threadpool_limits):
                (switches or {}).get(name, lambda: None)()
                best, best_laps = _round(ways[name], calls, runs, sync, timer)
            samples[name].append(best)
            for lap, seconds in best_laps.items():
                laps[name].setdefault(lap, []).append(seconds)
    labels = {describe(one) for one in chosen.values()}
    label = labels.pop() if len(labels) == 1 else "; ".join(
        f"{name} on {describe(one)}" for name, one in chosen.items())
    return Measurement(label, threads, runs, samples, laps)


def cpu_while_idle(before: Callable[[], Any], nap: float = 0.3) -> float:
    """CPU seconds this process uses while it only sleeps ``nap`` s, right after
    ``before()`` ran: threads that ``before`` left busy (a BLAS library's helpers spinning
    for the next product) are all that can use it. It first sleeps ``nap`` s, so the
    helpers of whatever ran earlier have gone quiet."""
    time.sleep(nap)
    before()
    start = time.process_time()
    time.sleep(nap)
    return time.process_time() - start


def _engine_of(name_or_engine: Any) -> Any:
    """An engine to keep for the whole measurement (a name makes one, once)."""
    from hybridlab import engine as engines

    if isinstance(name_or_engine, str):
        return getattr(engines, name_or_engine)()
    return name_or_engine


@contextlib.contextmanager
def _limit_threads(threads: int | None, limits: Callable[..., Any]) -> Iterator[None]:
    if threads is None:
        yield
        return
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    try:
        if torch is not None:
            torch.set_num_threads(threads)
        with limits(threads, user_api="blas"):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(before)


def _round(way: Callable[..., Any], calls: int, runs: int, sync: bool,
           timer: Callable[[], float]) -> tuple[float, dict[str, float]]:
    """(seconds per call, its laps per call) of the fastest of ``runs`` runs of one way."""
    takes_laps = any(parameter.default is parameter.empty and parameter.kind in (
        parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        for parameter in inspect.signature(way).parameters.values())
    _sync(way(Laps(lambda: 0.0)) if takes_laps else way())  # warm up, untimed, unclocked
    best, best_laps = float("inf"), {}
    for _ in range(runs):
        stopwatch = Laps(timer)
        start = timer()
        for _ in range(calls):
            result = way(stopwatch) if takes_laps else way()
        if sync:
            _sync(result)
        seconds = (timer() - start) / calls
        if not sync:
            _sync(result)  # untimed: the next run starts on an idle engine
        if seconds < best:
            best = seconds
            best_laps = {lap: total / calls for lap, total in stopwatch.totals.items()}
    return best, best_laps


def _sync(result: Any) -> None:
    from hybridlab import ndarray as nd

    nd.waitall()
    if hasattr(result, "block_until_ready"):
        result.block_until_ready()


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
    Dense layers), under the protocol of NOTE [A fair floor] (:func:`measure`, the naive
    engine, ``repeats`` calls a round in three runs). Leaves ``net`` hybridized."""
    net.hybridize(active=False)
    net(x).wait_to_read()  # finishes deferred initialisation before numpy_mlp reads
    forward, array = numpy_mlp(net), x.asnumpy()
    measured = measure({"imperative": lambda: net(x), "hybridized": lambda: net(x),
                        "floor": lambda: forward(array)},
                       rounds=rounds, calls=max(1, repeats // RUNS),
                       switches={"imperative": lambda: net.hybridize(active=False),
                                 "hybridized": lambda: net.hybridize()})
    net.hybridize()
    return Timing(*(measured[way] * 1e6 for way in ("imperative", "hybridized", "floor")))


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


def where_time_goes(net: Any, x: Any, calls: int = 200, rounds: int = 5
                    ) -> tuple[Breakdown, Breakdown]:
    """(hybridized, imperative) breakdowns of ``net(x)`` for a HybridBlock, every layer
    and kernel timed by :func:`measure` in the same rounds; leaves ``net`` hybridized."""
    from hybridlab.lab.graphs import cached_op_of

    net.hybridize()
    net(x).wait_to_read()
    op = cached_op_of(net)
    program = op.last_program
    arrays = op.arguments([x.asnumpy()])  # x, the parameters (and layout copies)
    function = program.function
    steps = _kernel_steps(program.graph, arrays)
    ways: dict[str, Callable[[], Any]] = {f"kernel {k}": kernel
                                          for k, (_, _, kernel) in enumerate(steps)}
    ways.update({"function": lambda: function(*arrays), "cached_op": lambda: op(x),
                 "block": lambda: net(x), "imperative": lambda: net(x)})
    # (a switch forgets the compiled program: measure's untimed first call compiles it)
    m = measure(ways, rounds=rounds, calls=max(1, calls // RUNS),
                switches={"block": lambda: net.hybridize(True),
                          "imperative": lambda: net.hybridize(False)})
    net.hybridize()
    net(x).wait_to_read()
    kernels = [(node, op_name, m[f"kernel {k}"]) for k, (node, op_name, _) in enumerate(steps)]
    sums = [sum(values) for values in zip(*(m.samples[f"kernel {k}"]
                                            for k in range(len(steps))))]

    def added(outer: str, inner: str | None) -> float:
        """The median over rounds of what ``outer`` adds to ``inner`` *in the same round*:
        paired differences, so a slow round cancels out."""
        if inner is not None:
            return m.difference(outer, inner)
        return float(statistics.median(o - i for o, i in zip(m.samples[outer], sums)))

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


def kernel_times(net: Any, x: Any, rounds: int = 1, runs: int = 2
                 ) -> list[tuple[str, str, float]]:
    """``(node, operator, seconds)`` for every kernel of the program ``net`` compiled for
    ``x`` (a hybridized block that has run), each kernel called alone on the arrays it
    receives in a real run, timed by :func:`measure`."""
    from hybridlab.lab.graphs import cached_op_of

    op = cached_op_of(net)
    steps = _kernel_steps(op.last_program.graph, op.arguments([x.asnumpy()]))
    m = measure({f"kernel {k}": kernel for k, (_, _, kernel) in enumerate(steps)},
                rounds=rounds, calls=1, runs=runs)
    return [(node, op_name, m[f"kernel {k}"]) for k, (node, op_name, _) in enumerate(steps)]


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
