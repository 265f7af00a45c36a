"""How much does hybridize() buy? The seed's MLP, imperative vs compiled vs plain numpy.

The network is the seed's (512 -> 256 relu -> 128 relu -> 2). For batch sizes 1, 64 and
1024 we time ``net(x)`` (forward only, ending with ``nd.waitall()``):

* imperative (every operator pushed to the engine one by one),
* hybridized (one CachedOp call = one engine op; the default: the weights' layout chosen
  by measurement on the first call, ``graph/autotune.py``),
* hybridized with ``static_alloc=True, static_shape=True`` (also autotuned),

under the NaiveEngine and the ThreadedEngine, next to hand-written numpy and numpy with
preallocated ``out=`` buffers: the *floor*, the same maths on the same weight layout
(``x @ W.T`` with ``W`` stored ``(out, in)``, as MXNet and hybridlab store it) with no
framework at all. One more row stores each weight transposed once (``x @ Wt``): that
layout alone is faster in OpenBLAS at batch 64, and shows what a framework that kept
its weights that way would gain; ratios are to the same-layout floor. The row
``pre-transposed / NaiveEngine`` is hybridlab doing that always: ``hybridize(passes=
[pretranspose_weights])``, the layout pass (weights transposed once, kept by CachedOp);
``as stored / NaiveEngine`` never (``hybridize(autotune=False)``); the default rows do it
where the first call measured it faster, and the table prints what each chose.
The peers appear when they are installed (never a dependency): PyTorch eager and
TorchScript traced and frozen (torch), ``jax.jit`` (jax, on one XLA thread), and a last
table puts hybridize() beside them -- x the floor and GFLOP/s, with the core's practical
peak measured in the same run (a large square product) and the targets: batch 1 at most
TorchScript's time, batch 64 at most every peer's, batch 1024 at most JAX's. Then one
training step (forward,
loss, backward, SGD) at batch 1 and 64: imperative; hybridized (net and loss each
hybridized); the net and its loss hybridized as one block (``WithLoss``: one CachedOp, so
one forward and one compiled backward program a step); and that block with static_alloc.

The BLAS kernel decides what pays (the layout pass pays with OpenBLAS's SkylakeX kernel,
not with its Haswell one), so the table's header names it (threadpoolctl). Run with
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` unset to measure the kernel OpenBLAS picks
for the machine: ``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 ...``.

Fairness: every forward row reads the very same weight buffers, each placed at a 64-byte
boundary (``aligned``): where a weight matrix starts moves a batch-1 forward by about 5%
(weights 16 bytes past a 64-byte boundary, where numpy usually puts them, split vector
loads across two cache lines; measured as NOTE [Aligned weights] says: 17.6 -> 18.5 us),
luck that would otherwise differ from row to row and from run to run (hybridlab aligns
its own parameters the same way: NOTE [Aligned weights] in gluon/parameter.py, but the
torch and numpy rows would not be). BLAS uses the same number of threads
in every row (``--blas-threads``, default 1, set with threadpoolctl around each
measurement, because the ThreadedEngine limits BLAS while it runs) and the table prints
the number each row really ran with.
Each cell is the median over ``--repeats`` runs of ``--calls`` calls; the repeats are
interleaved (every row once, then every row again), so drift hits every row alike.
Absolute times are illustrations; ratios measured in one run are the result.

The calls are pushed back to back and waited for once: that is throughput, as a
training or serving loop sees it. Under the ThreadedEngine two calls overlap on two
workers (call k+1's first layer runs while call k finishes), so its rows can beat the
single-threaded floor at batch 64 and 1024 with BLAS on one thread in every row.

    python3 benchmarks/hybridize_mlp.py [--calls 1000] [--repeats 5] [--blas-threads 1]
                                        [--forward-only] [--profile]

``--profile`` prints where a hybridized batch-1 call spends its time: cProfile, then the
call peeled layer by layer at batch 1 and 64 (each kernel, the generated function, the
CachedOp call, the block; the imperative call beside it): ``viz.breakdown``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hybridlab as mx
from hybridlab import autograd, engine, gluon, nd
from hybridlab.gluon import nn
from hybridlab.gluon.parameter import aligned
from hybridlab.graph.passes.pretranspose_weights import pretranspose_weights
from hybridlab.ops.products import dot_c

ENGINES = ("NaiveEngine", "ThreadedEngine")
BATCHES = (1, 64, 1024)
FLOOR = "numpy out="


def get_net(mode: str, shared: list[np.ndarray] | None = None) -> nn.HybridSequential:
    """The seed MLP; with ``shared``, its parameters hold those very buffers (no copy)."""
    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"), nn.Dense(2))
    net.initialize()
    net(nd.ones((1, 512)))
    for param, values in zip(net.collect_params().values(), shared or ()):
        nd.from_numpy(values).copyto(param.data())  # same dtype: the buffer is shared
    nd.waitall()
    if mode == "hybridized":  # the default: the layout measured on the first call
        net.hybridize(autotune=True)
    elif mode == "as stored":  # the weights read as stored, (out, in): no measurement
        net.hybridize(autotune=False)
    elif mode == "pre-transposed":  # the layout pass always: weights read as (in, out)
        net.hybridize(passes=[pretranspose_weights])
    elif mode == "static":
        net.hybridize(static_alloc=True, static_shape=True, autotune=True)
    return net


class WithLoss(gluon.HybridBlock):
    """A network and its loss as one block: hybridized, one CachedOp computes the loss
    (one forward program, one compiled backward program per training step)."""

    def __init__(self, net: Any, loss: Any) -> None:
        super().__init__()
        self.net, self.loss = net, loss

    def hybrid_forward(self, F: Any, x: Any, y: Any) -> Any:
        return self.loss(self.net(x), y)


def weights(net: nn.HybridSequential) -> list[np.ndarray]:
    """Copies of the weights, each at a 64-byte boundary (see Fairness above)."""
    return [aligned(p.data().asnumpy()) for p in net.collect_params().values()]


def numpy_forward(params: list[np.ndarray]) -> Callable:
    w1, b1, w2, b2, w3, b3 = params

    def run(x: np.ndarray) -> np.ndarray:
        h = np.maximum(x @ w1.T + b1, 0)
        h = np.maximum(h @ w2.T + b2, 0)
        return h @ w3.T + b3

    return run


def numpy_out_forward(params: list[np.ndarray], batch: int, pretransposed: bool) -> Callable:
    """Preallocated buffers, in-place bias and relu: no allocation per call. ``np.dot``,
    not ``np.matmul`` (``@``): the same BLAS product with less work around it, measured
    0.4-0.5 us faster per layer at batch 1 and as fast at batch 64 and 1024; and the C
    function behind ``np.dot``, without the Python dispatcher that asks whether an
    argument overrides it (``__array_function__``): 0.25 us less per layer. hybridlab's
    FullyConnected kernels call the same function, ``dot_c`` (NOTE [np.dot, not @] in
    products.py). (lab/timing.py's ``numpy_mlp`` is the same floor for any MLP, with a loop
    over the layers; this one is unrolled, as its pre-transposed variant.)"""
    dot = dot_c
    w1, b1, w2, b2, w3, b3 = params
    h1, h2, out = (np.empty((batch, n), np.float32) for n in (256, 128, 2))
    if pretransposed:
        m1, m2, m3 = (aligned(w.T) for w in (w1, w2, w3))  # C-contiguous copies
    else:
        m1, m2, m3 = w1.T, w2.T, w3.T

    def run(x: np.ndarray) -> np.ndarray:
        dot(x, m1, out=h1)
        np.add(h1, b1, out=h1)
        np.maximum(h1, 0, out=h1)
        dot(h1, m2, out=h2)
        np.add(h2, b2, out=h2)
        np.maximum(h2, 0, out=h2)
        dot(h2, m3, out=out)
        np.add(out, b3, out=out)
        return out

    return run


def blas_threads() -> int:
    """The number of threads BLAS would use now (what the row really ran with)."""
    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"),
               default=0)


def blas_kernel() -> str:
    """numpy's BLAS, its version and the kernel it chose for this CPU (threadpoolctl)."""
    return ", ".join(f"{i['internal_api']} {i['version']} {i.get('architecture', '?')}"
                     for i in threadpool_info() if i["user_api"] == "blas")


def time_calls(function: Callable, argument: Any, calls: int, sync: Callable,
               blas: int) -> tuple[float, int]:
    """Seconds per call, and the BLAS threads in force at the end of the timing."""
    with threadpool_limits(blas, user_api="blas"):  # after the engine set its own limit
        function(argument)  # warm-up: traces, compiles (and measures the layouts)
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            function(argument)
        sync()
        elapsed = time.perf_counter() - start
        return elapsed / calls, blas_threads()


def torch_rows(params: list[np.ndarray], batch: int, blas: int) -> dict[str, Callable]:
    """PyTorch's peers, when torch is installed: eager, and TorchScript traced and frozen
    (``torch.jit.freeze(torch.jit.trace(...))``: the graph fixed, weights as constants --
    its fastest inference form), on ``blas`` threads."""
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(blas)
    model = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 2)).eval()
    with torch.no_grad():
        for layer, (w, b) in zip(model[::2], zip(params[::2], params[1::2])):
            layer.weight.copy_(torch.from_numpy(w))
            layer.bias.copy_(torch.from_numpy(b))
    x = torch.randn(batch, 512)
    with torch.no_grad():
        frozen = torch.jit.freeze(torch.jit.trace(model, x))

    def wrap(module: Any) -> Callable:
        def run(_: Any) -> Any:
            with torch.no_grad():
                return module(x)
        return run

    return {"torch eager": wrap(model), "TorchScript trace+freeze": wrap(frozen)}


def jax_rows(params: list[np.ndarray], batch: int) -> dict[str, Callable]:
    """JAX's peer, when jax is installed: the MLP under ``jax.jit`` on the CPU, each call
    waited for (``block_until_ready``) as hybridlab's rows are by ``nd.waitall``."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    w1, b1, w2, b2, w3, b3 = (jax.device_put(p) for p in params)

    @jax.jit
    def mlp(x: Any) -> Any:
        h = jnp.maximum(x @ w1.T + b1, 0)
        h = jnp.maximum(h @ w2.T + b2, 0)
        return h @ w3.T + b3

    x = jax.device_put(np.random.default_rng(0).normal(size=(batch, 512)).astype(np.float32))
    mlp(x).block_until_ready()  # compiled once, here
    return {"jax.jit": lambda _: mlp(x).block_until_ready()}


def peak_gflops(blas: int, size: int = 2048, repeats: int = 5) -> float:
    """The core's practical peak here: GFLOP/s of a large square float32 product on
    ``blas`` threads, the best of ``repeats`` (what BLAS reaches when nothing else costs)."""
    a = np.random.default_rng(0).random((size, size), np.float32)
    best = float("inf")
    with threadpool_limits(blas, user_api="blas"):
        for _ in range(repeats):
            start = time.perf_counter()
            np.dot(a, a)
            best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best / 1e9


Row = tuple[str, int, float, int]  # label, batch, seconds per call, BLAS threads


def forward_table(calls: int, repeats: int, blas: int) -> list[Row]:
    rows: list[Row] = []
    for batch in BATCHES:
        n = calls if batch < 1024 else max(calls // 10, 10)
        x_np = np.random.default_rng(0).normal(size=(batch, 512)).astype(np.float32)
        params = weights(get_net("imperative"))  # read by every row below
        cases = {f"{mode} / {name}": (name, get_net(mode, params)) for name in ENGINES
                 for mode in ("imperative", "hybridized", "static")}
        for mode in ("as stored", "pre-transposed"):
            cases[f"{mode} / NaiveEngine"] = ("NaiveEngine", get_net(mode, params))
        plain = {"numpy": numpy_forward(params),
                 FLOOR: numpy_out_forward(params, batch, pretransposed=False),
                 "numpy out=, W pre-transposed": numpy_out_forward(params, batch, True)}
        plain.update(torch_rows(params, batch, blas))
        plain.update(jax_rows(params, batch))
        samples: dict[str, list[tuple[float, int]]] = {k: [] for k in [*cases, *plain]}
        for _ in range(repeats):  # interleaved, so drift hits every row alike
            for label, (engine_name, net) in cases.items():
                with engine.engine_scope(engine_name):
                    x = nd.array(x_np)
                    samples[label].append(time_calls(net, x, n, nd.waitall, blas))
            for label, run in plain.items():
                samples[label].append(time_calls(run, x_np, n, lambda: None, blas))
        rows += [(label, batch, statistics.median(t for t, _ in v), min(b for _, b in v))
                 for label, v in samples.items()]
        for label, (_, net) in cases.items():
            layout = getattr(net._cached_op, "layout", None) if net._active else None
            if layout is not None:
                CHOICES.append(f"batch {batch:4d} {label:28s} {layout}")
    return rows


CHOICES: list[str] = []  # what each autotuned row's first call measured and chose


def training_times(repeats: int, batch: int, blas: int, steps: int = 200) -> dict[str, float]:
    """Median seconds per training step, imperative / hybridized / static, interleaved."""
    x = nd.array(np.random.default_rng(0).normal(size=(batch, 512)).astype(np.float32))
    y = nd.array(np.random.default_rng(1).integers(0, 2, size=batch).astype(np.float32))
    steppers = {}
    for mode in ("imperative", "hybridized", "net+loss", "net+loss static"):
        net = get_net("imperative" if mode == "imperative" else "hybridized")
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
        if mode.startswith("net+loss"):  # one block, one CachedOp: x, y -> loss
            both = WithLoss(net, loss_fn)
            both.hybridize(static_alloc=mode.endswith("static"))
            steppers[mode] = make_step(lambda z: z, both, trainer, x, y)
            continue
        if mode != "imperative":
            loss_fn.hybridize()
        steppers[mode] = make_step(net, loss_fn, trainer, x, y)
    samples: dict[str, list[float]] = {mode: [] for mode in steppers}
    with engine.engine_scope("NaiveEngine"):
        for _ in range(repeats):
            for mode, step in steppers.items():
                samples[mode].append(time_calls(step, None, steps, nd.waitall, blas)[0])
    return {mode: statistics.median(v) for mode, v in samples.items()}


def make_step(net: Any, loss_fn: Any, trainer: Any, x: Any, y: Any) -> Callable:
    def step(_: Any) -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])

    return step


def print_tables(rows: list[Row], train: dict[int, dict[str, float]], calls: int,
                 blas: int) -> None:
    floor = {b: t for label, b, t, _ in rows if label == FLOOR}
    imperative = {(b, label.split(" / ")[1]): t for label, b, t, _ in rows
                  if label.startswith("imperative")}
    print(f"\nforward of the seed MLP, median time per call ({calls} calls; batch 1024: "
          f"{max(calls // 10, 10)} calls); BLAS threads asked: {blas}; BLAS: {blas_kernel()}")
    print(f"{'row':34s} {'batch':>5s} {'us/call':>10s} {'x floor':>8s} {'speed-up':>9s} "
          f"{'BLAS':>5s}")
    for label, batch, seconds, threads in rows:
        engine_name = label.split(" / ")[1] if " / " in label else None
        speed = imperative.get((batch, engine_name))
        speed_text = f"{speed / seconds:8.2f}x" if speed and "imperative" not in label else ""
        print(f"{label:34s} {batch:5d} {seconds * 1e6:10.1f} {seconds / floor[batch]:7.2f}x "
              f"{speed_text:>9s} {threads:5d}")
    peers_table(rows, floor, blas)
    print("\nthe weights' layout each autotuned row chose on its first call (graph/autotune.py)")
    for line in CHOICES:
        print(f"  {line}")
    print("\ntraining step (forward + loss + backward + SGD), NaiveEngine, us per step")
    for batch, times in train.items():
        base = times["imperative"]
        parts = "   ".join(f"{mode} {t * 1e6:8.1f} ({base / t:4.2f}x)" for mode, t in times.items())
        print(f"batch {batch:<4d} {parts}")


FLOPS = 2 * (512 * 256 + 256 * 128 + 128 * 2)  # multiply-adds of one sample, twice
PEERS = ("TorchScript trace+freeze", "torch eager", "jax.jit")
OURS = ("hybridized / NaiveEngine", "hybridized / ThreadedEngine")


def peers_table(rows: list[Row], floor: dict[int, float], blas: int) -> None:
    """hybridize() against the peers in this run: x the floor, GFLOP/s, and the targets --
    batch 1 at most TorchScript's time, batch 64 at most every peer's, batch 1024 at most
    JAX's."""
    times = {(label, batch): seconds for label, batch, seconds, _ in rows}
    present = [p for p in PEERS if (p, 1) in times]
    if not present:
        print("\n(no peers: install torch and jax in this environment to compare)")
        return
    print(f"\nhybridize() against its peers, x the numpy out= floor (GFLOP/s); the core's "
          f"peak here: {peak_gflops(blas):.0f} GFLOP/s (a 2048 x 2048 product, {blas} BLAS "
          f"thread(s))")
    print(f"{'batch':>5s} " + "".join(f"{name:>30s}" for name in (*OURS, *present)))
    targets = {1: ("TorchScript trace+freeze",), 64: PEERS, 1024: ("jax.jit",)}
    for batch in BATCHES:
        cells = [f"{times[(n, batch)] / floor[batch]:.2f}x "
                 f"({FLOPS * batch / times[(n, batch)] / 1e9:.1f})" for n in (*OURS, *present)]
        print(f"{batch:5d} " + "".join(f"{c:>30s}" for c in cells))
        best = min(times[(n, batch)] for n in OURS)
        for peer in (p for p in targets[batch] if p in present):
            verdict = "met" if best <= times[(peer, batch)] else "MISSED"
            print(f"      target: hybridize() at most {peer}'s time: {verdict}")


def profile_hybridized(calls: int, repeats: int, blas: int) -> None:
    """Where a hybridized batch-1 call spends its time: cProfile, then layer by layer."""
    shared = weights(get_net("imperative"))
    net = get_net("hybridized", shared)
    x = nd.ones((1, 512))
    with engine.engine_scope("NaiveEngine"):
        net(x)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(2000):
            net(x)
        nd.waitall()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        call_layers(net, calls, repeats)


def call_layers(net: Any, calls: int, repeats: int) -> None:
    """Peel the call like an onion: ``hybridlab.viz.breakdown.where_time_goes`` (the one
    implementation the lessons draw too) -- each kernel alone, then what the generated
    function, the CachedOp call and the block add, and the imperative call beside it."""
    from hybridlab.lab.timing import where_time_goes

    for batch in (1, 64):
        data = nd.ones((batch, 512))
        print(f"\nbatch {batch}, layer by layer (NaiveEngine, one BLAS thread, median of "
              f"{repeats} interleaved rounds of {calls} calls)")
        for breakdown in where_time_goes(net, data, calls, repeats):
            print(f"  {breakdown}")
            for name, op, seconds in breakdown.kernels if breakdown.label == "hybridized" else ():
                print(f"    kernel {name:24s} {op:16s} {seconds * 1e6:8.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--forward-only", action="store_true", help="skip the training step")
    args = parser.parse_args()
    if args.blas_threads == 1:  # XLA's own threads: one, as every other row's (before jax)
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                           "intra_op_parallelism_threads=1")
    import warnings
    warnings.simplefilter("ignore")  # no hybridization reports in the table
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = forward_table(args.calls, args.repeats, args.blas_threads)
    train = {} if args.forward_only else {
        batch: training_times(args.repeats, batch, args.blas_threads) for batch in (1, 64)}
    print_tables(rows, train, args.calls, args.blas_threads)
    if args.profile:
        profile_hybridized(args.calls, args.repeats, args.blas_threads)


if __name__ == "__main__":
    main()
