"""How much does hybridize() buy? The seed's MLP, imperative vs compiled vs plain numpy.

The network is the seed's (512 -> 256 relu -> 128 relu -> 2). For batch sizes 1, 64 and
1024 we time ``net(x)`` (forward only, ending with ``nd.waitall()``):

* imperative (every operator pushed to the engine one by one),
* hybridized (one CachedOp call = one engine op),
* hybridized with ``static_alloc=True, static_shape=True``,

under the NaiveEngine and the ThreadedEngine, next to hand-written numpy, numpy with
preallocated ``out=`` buffers (the floor: the same maths with no framework at all), and
PyTorch eager/TorchScript when torch is installed. The floor also stores each weight
transposed once, so it multiplies by a contiguous ``Wt`` where ``FullyConnected`` and the
``numpy`` row use ``W.T``: at batch 64 that layout alone is worth ~20% in OpenBLAS.
Then one training step (forward, loss, backward, SGD) imperative vs hybridized at
batch 1 and 64.

Each cell is the median over ``--repeats`` runs of ``--calls`` calls, interleaved, in one
process; ratios are to the numpy ``out=`` floor of the same batch size. Absolute times
are illustrations; ratios are the result.

    python3 benchmarks/hybridize_mlp.py [--calls 1000] [--repeats 5] [--profile]

``--profile`` prints where a hybridized batch-1 call spends its time (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # fair to every row: one BLAS thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hybridlab as mx  # noqa: E402
from hybridlab import autograd, engine, gluon, nd  # noqa: E402
from hybridlab.gluon import nn  # noqa: E402

ENGINES = ("NaiveEngine", "ThreadedEngine")
BATCHES = (1, 64, 1024)


def get_net(mode: str) -> nn.HybridSequential:
    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"), nn.Dense(2))
    net.initialize()
    net(nd.ones((1, 512)))
    if mode == "hybridized":
        net.hybridize()
    elif mode == "static":
        net.hybridize(static_alloc=True, static_shape=True)
    return net


def weights(net: nn.HybridSequential) -> list[np.ndarray]:
    return [p.data().asnumpy() for p in net.collect_params().values()]


def numpy_forward(params: list[np.ndarray]) -> callable:
    w1, b1, w2, b2, w3, b3 = params

    def run(x: np.ndarray) -> np.ndarray:
        h = np.maximum(x @ w1.T + b1, 0)
        h = np.maximum(h @ w2.T + b2, 0)
        return h @ w3.T + b3

    return run


def numpy_out_forward(params: list[np.ndarray], batch: int) -> callable:
    w1, b1, w2, b2, w3, b3 = params
    t1, t2, h1, h2, out = (np.empty((batch, n), np.float32) for n in (256, 128, 256, 128, 2))
    w1t, w2t, w3t = (np.ascontiguousarray(w.T) for w in (w1, w2, w3))

    def run(x: np.ndarray) -> np.ndarray:
        np.matmul(x, w1t, out=t1)
        np.add(t1, b1, out=t1)
        np.maximum(t1, 0, out=h1)
        np.matmul(h1, w2t, out=t2)
        np.add(t2, b2, out=t2)
        np.maximum(t2, 0, out=h2)
        np.matmul(h2, w3t, out=out)
        np.add(out, b3, out=out)
        return out

    return run


def time_calls(function: callable, argument: object, calls: int, sync: callable) -> float:
    function(argument)  # warm-up: traces and compiles the hybridized block
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        function(argument)
    sync()
    return (time.perf_counter() - start) / calls


def torch_rows(params: list[np.ndarray], batch: int) -> dict[str, callable]:
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 2)).eval()
    with torch.no_grad():
        for layer, (w, b) in zip(model[::2], zip(params[::2], params[1::2])):
            layer.weight.copy_(torch.from_numpy(w))
            layer.bias.copy_(torch.from_numpy(b))
    scripted = torch.jit.script(model)
    x = torch.randn(batch, 512)

    def wrap(module: object) -> callable:
        def run(_: object) -> object:
            with torch.no_grad():
                return module(x)
        return run

    return {"torch eager": wrap(model), "TorchScript": wrap(scripted)}


def forward_table(calls: int, repeats: int) -> list[tuple[str, int, float]]:
    rows = []
    for batch in BATCHES:
        n = calls if batch < 1024 else max(calls // 10, 10)
        x_np = np.random.default_rng(0).normal(size=(batch, 512)).astype(np.float32)
        cases = {}
        for engine_name in ENGINES:
            for mode in ("imperative", "hybridized", "static"):
                cases[f"{mode} / {engine_name}"] = (engine_name, get_net(mode))
        params = weights(get_net("imperative"))
        plain = {"numpy": numpy_forward(params), "numpy out=": numpy_out_forward(params, batch)}
        plain.update(torch_rows(params, batch))
        samples: dict[str, list[float]] = {k: [] for k in [*cases, *plain]}
        for _ in range(repeats):  # interleaved, so drift hits every row alike
            for label, (engine_name, net) in cases.items():
                with engine.engine_scope(engine_name):
                    x = nd.array(x_np)
                    samples[label].append(time_calls(net, x, n, nd.waitall))
            for label, run in plain.items():
                samples[label].append(time_calls(run, x_np, n, lambda: None))
        rows += [(label, batch, statistics.median(v)) for label, v in samples.items()]
    return rows


def training_step_times(repeats: int, batch: int, steps: int = 200) -> dict[str, float]:
    x = nd.array(np.random.default_rng(0).normal(size=(batch, 512)).astype(np.float32))
    y = nd.array(np.random.default_rng(1).integers(0, 2, size=batch).astype(np.float32))
    results = {}
    for mode in ("imperative", "hybridized"):
        net = get_net(mode)
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        if mode == "hybridized":
            loss_fn.hybridize()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
        step = make_step(net, loss_fn, trainer, x, y)
        with engine.engine_scope("NaiveEngine"):
            results[mode] = statistics.median(
                time_calls(step, None, steps, nd.waitall) for _ in range(repeats))
    return results


def make_step(net: object, loss_fn: object, trainer: object, x: object, y: object) -> callable:
    def step(_: object) -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])

    return step


def print_tables(rows: list[tuple[str, int, float]], train: dict[int, dict[str, float]],
                 calls: int) -> None:
    floor = {b: t for label, b, t in rows if label == "numpy out="}
    imperative = {(b, label.split(" / ")[1]): t for label, b, t in rows
                  if label.startswith("imperative")}
    print(f"\nforward of the seed MLP, median time per call ({calls} calls; batch 1024: "
          f"{max(calls // 10, 10)} calls)")
    print(f"{'row':34s} {'batch':>5s} {'us/call':>10s} {'x floor':>8s} {'speed-up':>9s}")
    for label, batch, seconds in rows:
        engine_name = label.split(" / ")[1] if " / " in label else None
        speed = imperative.get((batch, engine_name))
        speed_text = f"{speed / seconds:8.2f}x" if speed and "imperative" not in label else ""
        print(f"{label:34s} {batch:5d} {seconds * 1e6:10.1f} {seconds / floor[batch]:7.2f}x "
              f"{speed_text:>9s}")
    print("\ntraining step (forward + loss + backward + SGD), NaiveEngine")
    for batch, times in train.items():
        ratio = times["imperative"] / times["hybridized"]
        print(f"{'batch':>5s} {batch:<4d} imperative {times['imperative'] * 1e6:9.1f} us   "
              f"hybridized {times['hybridized'] * 1e6:9.1f} us   speed-up {ratio:5.2f}x")


def profile_hybridized() -> None:
    net = get_net("hybridized")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    import warnings
    warnings.simplefilter("ignore")  # no hybridization reports in the table
    rows = forward_table(args.calls, args.repeats)
    train = {batch: training_step_times(args.repeats, batch) for batch in (1, 64)}
    print_tables(rows, train, args.calls)
    if args.profile:
        profile_hybridized()


if __name__ == "__main__":
    main()
