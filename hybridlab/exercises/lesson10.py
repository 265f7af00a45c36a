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

from hybridlab.exercises._common import Feedback


def data(seed: int, steps: int, batch: int, features: int, classes: int = 3
         ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``steps`` global batches ``(x, y)`` drawn from ``seed`` (the same on every rank)."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(batch, features)).astype(np.float32),
             rng.integers(0, classes, size=batch).astype(np.float32)) for _ in range(steps)]


def train_mlp(hidden: tuple[int, ...] = (64,), seed: int = 0, steps: int = 3, batch: int = 8,
              features: int = 5, devices: int = 1, kvstore: str | None = "device",
              optimizer: tuple[str, dict] = ("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
              hybridize: bool = True, timer: Callable[[], float] = time.perf_counter
              ) -> dict[str, Any]:
    """Train an MLP (``hidden`` relu layers, then 3 classes) for ``steps`` steps; returns
    ``{"weights": [numpy arrays], "step_times": [seconds], "rank", "num_workers"}``.

    With ``kvstore='dist_sync'``/``'dist_async'`` it must run on the workers of
    ``hybridlab.dask.run_workers``: each rank takes its slice of every global batch and
    calls ``trainer.step`` with the *global* batch size (the store sums every rank's
    gradient). ``devices`` splits each rank's slice again over ``cpu(0..devices-1)``.
    """
    import hybridlab as mx
    from hybridlab import autograd, gluon, nd
    from hybridlab.gluon import nn

    store = mx.kv.create(kvstore) if kvstore and kvstore.startswith("dist") else kvstore
    rank, workers = (store.rank, store.num_workers) if store is not None and not isinstance(
        store, str) else (0, 1)
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
    times = []
    for x, y in data(seed, steps, batch, features):
        start = timer()
        rows = np.array_split(np.arange(batch), workers)[rank]
        xs = gluon.utils.split_and_load(nd.array(x[rows]), ctx, even_split=False)
        ys = gluon.utils.split_and_load(nd.array(y[rows]), ctx, even_split=False)
        with autograd.record():
            losses = [loss(net(a), b) for a, b in zip(xs, ys)]
        for value in losses:
            value.backward()
        trainer.step(batch)
        nd.waitall()
        times.append(timer() - start)
    weights = [p.list_data()[0].asnumpy() for p in net.collect_params().values()]
    return {"weights": weights, "step_times": times, "rank": rank, "num_workers": workers}


def check_allreduce_time(answer: float, kind: str, n: int, size: float, alpha: float,
                         beta: float) -> Feedback:
    """Predict the time of an all-reduce (``kind``: 'server', 'ring' or 'tree') of ``size``
    bytes over ``n`` devices, with ``alpha`` seconds per message and ``beta`` seconds per
    byte; the check computes it with ``lab.allreduce`` and says how far off you were."""
    from hybridlab.lab import allreduce

    expected = allreduce.AllReduceModel(kind, n, size, alpha, beta).time
    if not isinstance(answer, (int, float)) or isinstance(answer, bool) or answer <= 0:
        return Feedback(False, f"give a time in seconds (a positive number), not {answer!r}")
    ratio = answer / expected
    if abs(ratio - 1) <= 0.05:
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
