"""Exercise checks and the training runs of lesson 10 (many devices).

The training function :func:`train_mlp` is one function for every way the lesson runs
it -- one device, several devices of one process, one rank of a Dask cluster -- so the
runs differ only in where the batch's slices go and which store sums the gradients.
It lives in the package (not in the notebook) because Dask workers import it by name.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import (
    Feedback,
    interleaved_medians,
    judge_amount,
    judge_ratio,
    verdict,
)


def data(seed: int, steps: int, batch: int, features: int, classes: int = 3
         ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``steps`` global batches ``(x, y)`` drawn from ``seed`` (the same on every rank)."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(batch, features)).astype(np.float32),
             rng.integers(0, classes, size=batch).astype(np.float32)) for _ in range(steps)]


def _training(hidden: tuple[int, ...], seed: int, features: int, devices: int,
              kvstore: str | None, optimizer: tuple[str, dict], hybridize: bool
              ) -> Callable[..., Any]:
    """One training step of a fresh MLP, as a function ``step(x, y, laps=None)`` of a global
    batch; ``step.rank`` and ``step.num_workers`` say which slice this process takes."""
    import contextlib

    import hybridlab as mx
    from hybridlab import autograd, gluon, nd
    from hybridlab.gluon import nn

    store: Any = kvstore  # a type name; a dist store is made here, on the rank's worker
    rank, workers = 0, 1
    if kvstore is not None and kvstore.startswith("dist"):
        store = mx.kv.create(kvstore)
        rank, workers = store.rank, store.num_workers
    ctx = [mx.cpu(i) for i in range(devices)]
    mx.random.seed(seed)
    net = nn.HybridSequential()
    for units in hidden:
        net.add(nn.Dense(units, activation="relu"))
    net.add(nn.Dense(3))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), *optimizer, kvstore=store)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(x: np.ndarray, y: np.ndarray, laps: Any = None) -> None:
        rows = np.array_split(np.arange(len(x)), workers)[rank]
        with laps("compute") if laps is not None else contextlib.nullcontext():
            xs = gluon.utils.split_and_load(nd.array(x[rows]), ctx, even_split=False)
            ys = gluon.utils.split_and_load(nd.array(y[rows]), ctx, even_split=False)
            with autograd.record():
                losses = [loss(net(a), b) for a, b in zip(xs, ys)]
            for value in losses:
                value.backward()
            nd.waitall()
        trainer.step(len(x))
        nd.waitall()

    step.net, step.rank, step.num_workers = net, rank, workers  # type: ignore[attr-defined]
    return step


def train_mlp(hidden: tuple[int, ...] = (64,), seed: int = 0, steps: int = 3, batch: int = 8,
              features: int = 5, devices: int = 1, kvstore: str | None = "device",
              optimizer: tuple[str, dict] = ("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
              hybridize: bool = True) -> dict[str, Any]:
    """Train an MLP (``hidden`` relu layers, then 3 classes) for ``steps`` steps; returns
    ``{"weights": [numpy arrays], "rank", "num_workers"}``.

    With ``kvstore='dist_sync'``/``'dist_async'`` it must run on the workers of
    ``hybridlab.kvstore.run_workers``: each rank takes its slice of every global batch and
    calls ``trainer.step`` with the *global* batch size (the store sums every rank's
    gradient). ``devices`` splits each rank's slice again over ``cpu(0..devices-1)``.
    """
    step = _training(hidden, seed, features, devices, kvstore, optimizer, hybridize)
    for x, y in data(seed, steps, batch, features):
        step(x, y)
    weights = [p.list_data()[0].asnumpy() for p in step.net.collect_params().values()]  # type: ignore[attr-defined]
    return {"weights": weights, "rank": step.rank,  # type: ignore[attr-defined]
            "num_workers": step.num_workers}  # type: ignore[attr-defined]


def time_steps(hidden: tuple[int, ...] = (64,), seed: int = 0, batch: int = 8,
               features: int = 5, devices: int = 1, kvstore: str | None = "device",
               rounds: int = 3) -> dict[str, Any]:
    """The seconds of one training step of :func:`train_mlp`'s network, and of its
    forward and backward (``"compute"``: up to the sync before ``trainer.step``; the rest
    is summing the gradients and the update), by the course's protocol
    (:func:`hybridlab.lab.timing.measure`: the naive engine, one BLAS thread, the fastest
    of three steps in each of ``rounds`` rounds, the median). On ``run_workers`` every
    rank runs the same steps, so a ``dist_sync`` store sees each rank push every step."""
    from hybridlab.lab.timing import measure

    step = _training(hidden, seed, features, devices, kvstore,
                     ("sgd", {"learning_rate": 0.1, "momentum": 0.9}), True)
    (x, y), = data(seed, 1, batch, features)
    m = measure({"step": lambda laps: step(x, y, laps)}, rounds=rounds, calls=1)
    return {"step": m["step"], "compute": m.lap("step", "compute"), "rank": step.rank,  # type: ignore[attr-defined]
            "protocol": m.protocol}


def check_allreduce_time(answer: float, kind: str, n: int, size: float, alpha: float,
                         beta: float) -> Feedback:
    """Predict the time of an all-reduce (``kind``: 'server', 'ring' or 'tree') of ``size``
    bytes over ``n`` devices, with ``alpha`` seconds per message and ``beta`` seconds per
    byte; the check computes it with ``lab.allreduce`` and says how far off you were."""
    from hybridlab.lab import allreduce

    expected = allreduce.AllReduceModel(kind, n, size, alpha, beta).time
    if not isinstance(answer, (int, float)) or isinstance(answer, bool):
        return Feedback(False, f"give a time in seconds (a positive number), not {answer!r}")
    if answer <= 0:
        return Feedback(False, f"{answer!r} s would make summing free, but every message "
                               f"pays the latency alpha and every byte sent costs beta: the "
                               f"model says {expected:.3g} s ({allreduce.closed_form(kind)})")
    ratio = answer / expected
    if judge_amount(answer, expected, within=1.05).correct:
        return Feedback(True, f"right: {expected:.3g} s ({allreduce.closed_form(kind)})")
    hint = ("you counted the bytes but not the messages' latency" if ratio < 1 else
            "each device sends only its share of the data: count bytes per device, not the "
            "whole gradient per step")
    return Feedback(False, f"{answer:.3g} s is {ratio:.2f}x the model's {expected:.3g} s "
                           f"({allreduce.closed_form(kind)}); {hint}")


def check_break_even_batch(answer: int, compute_per_sample: float, step_overhead: float,
                           comm_time: float, workers: int = 2) -> Feedback:
    """From which batch size do ``workers`` workers beat one? One process takes
    ``overhead + B * c`` a step; each of the workers ``overhead + (B / workers) * c +
    comm``. Give the smallest whole batch size where the workers are faster."""
    if not isinstance(answer, int) or isinstance(answer, bool) or answer < 1:
        return Feedback(False, f"give a batch size (a whole number >= 1), not {answer!r}")
    expected = break_even_batch(compute_per_sample, step_overhead, comm_time, workers)
    if answer == expected:
        return Feedback(True, f"right: from batch {expected} the {workers} workers' share of "
                              f"the compute saves more than the all-reduce costs")
    side = "small: the all-reduce still costs more" if answer < expected else (
        "large: smaller batches already pay")
    return Feedback(False, f"batch {answer} is too {side} (the break-even batch is "
                           f"{expected}: B*c*(1 - 1/{workers}) > comm)")


def break_even_batch(compute_per_sample: float, step_overhead: float, comm_time: float,
                     workers: int = 2) -> int:
    """The smallest batch with ``B*c*(1 - 1/workers) > comm`` (the overhead cancels)."""
    saved_per_sample = compute_per_sample * (1 - 1 / workers)
    return int(np.floor(comm_time / saved_per_sample)) + 1


def check_fastest_way(answer: str, n: int, size: float, alpha: float, beta: float
                      ) -> Feedback:
    """Which all-reduce ('server', 'ring' or 'tree') is fastest for ``size`` bytes on
    ``n`` devices, with ``alpha`` s per message and ``beta`` s per byte?"""
    from hybridlab.lab import allreduce

    if answer not in allreduce.KINDS:
        return Feedback(False, f"answer one of {allreduce.KINDS}, not {answer!r}")
    times = {kind: allreduce.AllReduceModel(kind, n, size, alpha, beta).time
             for kind in allreduce.KINDS}
    best = min(times, key=times.__getitem__)
    listing = ", ".join(f"{kind} {t:.3g} s" for kind, t in times.items())
    if answer == best:
        return Feedback(True, f"right: {listing}")
    return Feedback(False, f"{answer} is not the fastest here ({listing}): compare the "
                           f"latencies (messages x alpha) with the bytes (x beta)")


def pushpull_times(sizes: list[int], rounds: int = 3) -> dict[int, float]:
    """On each rank of ``run_workers``: the seconds of one dist_sync ``pushpull`` of a
    float32 gradient of each size in bytes, by the course's protocol
    (:func:`hybridlab.lab.timing.measure`: the sizes in interleaved rounds, the fastest of
    three calls in a round, the median round). Every rank runs the same calls in the same
    order, so each pushpull meets the other rank's at the store."""
    import hybridlab as mx
    from hybridlab import ndarray as nd
    from hybridlab.lab.timing import measure

    kv = mx.kv.create("dist_sync")
    ways = {}
    for key, size in enumerate(sizes):
        grad = nd.ones((max(1, size // 4),))
        kv.init(key, nd.zeros(grad.shape))
        ways[str(size)] = (lambda key=key, grad=grad: kv.pushpull(key, grad, out=grad))
    m = measure(ways, rounds=rounds, calls=1)
    return {size: m[str(size)] for size in sizes}


def fit_alpha_beta(sizes: list[int], times: list[float], messages: float) -> tuple[float, float]:
    """``alpha`` and ``beta`` of ``time = messages * (alpha + beta * size)``, by least
    squares on the *relative* errors (``messages``: a way's message count on its busiest
    port, e.g. 2n): plain least squares would fit the largest size and ignore the small
    ones, whose time is all latency."""
    per_message = np.asarray(times, float) / messages
    slope, intercept = np.polyfit(np.asarray(sizes, float), per_message, 1, w=1 / per_message)
    return max(float(intercept), 0.0), max(float(slope), 0.0)


def check_two_device_step(prediction: float, timer: Callable[[], float] = time.perf_counter,
                          rounds: int = 5) -> Feedback:
    """Predict-then-measure: how many times longer does one training step of a small MLP
    (batch 64) take on two devices of this process, ``cpu(0)`` and ``cpu(1)``, than on one?
    Measured by the course's protocol (interleaved rounds, medians, one BLAS thread;
    ``timer`` injectable for tests) on the threaded engine with one worker per device, so
    that each device really has a thread of its own."""
    from hybridlab import engine

    if not isinstance(prediction, (int, float)) or isinstance(prediction, bool) or \
            not prediction > 0:
        return Feedback(False, f"predict a positive ratio (two devices / one), not "
                               f"{prediction!r}")
    steps = {"one device": _step_on(1), "two devices": _step_on(2)}
    times = interleaved_medians(steps, calls=3, rounds=rounds, timer=timer,
                                engine=engine.ThreadedEngine(workers=1))
    measured = times["two devices"] / times["one device"]
    judgement = judge_ratio(prediction, measured)
    line = (f"you predicted {prediction:g}x; measured {measured:.2f}x (one device "
            f"{times['one device'] * 1e3:.2f} ms, two {times['two devices'] * 1e3:.2f} ms a "
            f"step): {judgement.off}")
    why = ("each device has a worker thread of its own, but the layers are small: most of a "
           "step is Python (the engine, the operators' bookkeeping), and Python runs one "
           "thread at a time (the interpreter's lock), so the two workers mostly take turns "
           "-- splitting the batch saves little, while a step on two devices adds the copies "
           "of the slices and the gradients, the sum and the pulls back: more engine "
           "operations, each with its Python around it")
    return verdict(judgement, f"{line}. {why}")


def _step_on(devices: int) -> Callable[[], None]:
    """One training step of a (64 -> 64 -> 3) MLP on ``devices`` devices, batch 64."""
    import hybridlab as mx
    from hybridlab import autograd, gluon, nd
    from hybridlab.gluon import nn

    ctx = [mx.cpu(i) for i in range(devices)]
    net = nn.HybridSequential()
    net.add(nn.Dense(64, activation="relu"), nn.Dense(3))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    (x, y), = data(0, 1, 64, 64)
    batch, labels = nd.array(x), nd.array(y)

    def step() -> None:
        xs = gluon.utils.split_and_load(batch, ctx)
        ys = gluon.utils.split_and_load(labels, ctx)
        with autograd.record():
            losses = [loss(net(a), b) for a, b in zip(xs, ys)]
        for value in losses:
            value.backward()
        trainer.step(64)
        nd.waitall()

    return step


def data_parallel_step(layers: int = 3, forward: float = 1.0, backward: float = 2.0,
                       copy: float = 1.0, update: float = 0.5) -> dict[str, tuple]:
    """A data-parallel training step on two devices with a ``'local'`` store, as a task
    graph for the schedule explorer (``{name: (duration, [dependencies], device)}``):
    each device runs the forward through ``layers`` layers and the backward back; as soon
    as a layer's gradients exist on ``dev1`` they are copied to the store (the ``copy``
    stream), summed with ``dev0``'s and applied on the ``cpu`` (the store), and the new
    weights copied back. The durations are model units, not measurements."""
    tasks: dict[str, tuple] = {"load x1": (copy, [], "copy")}
    for dev in (0, 1):
        before = [] if dev == 0 else ["load x1"]
        for layer in range(layers):
            tasks[f"fwd{layer} d{dev}"] = (forward, before, f"dev{dev}")
            before = [f"fwd{layer} d{dev}"]
        for layer in reversed(range(layers)):
            tasks[f"bwd{layer} d{dev}"] = (backward, before, f"dev{dev}")
            before = [f"bwd{layer} d{dev}"]
    for layer in reversed(range(layers)):
        tasks[f"grad{layer} >store"] = (copy, [f"bwd{layer} d1"], "copy")
        tasks[f"sum+update{layer}"] = (update, [f"bwd{layer} d0", f"grad{layer} >store"], "cpu")
        tasks[f"w{layer} >d0"] = (copy, [f"sum+update{layer}"], "copy")
        tasks[f"w{layer} >d1"] = (copy, [f"sum+update{layer}"], "copy")
    return tasks
