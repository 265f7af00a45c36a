"""Real networks, imported from ONNX: hybridlab hybridized against onnxruntime, batch 1.

The light models onnx ships (SqueezeNet, ResNet-50, ... ; their weight values do not
change the work) are read with ``mx.contrib.onnx.import_to_gluon``, hybridized, and timed
against onnxruntime on the same input, both on one thread (onnxruntime's
``intra_op_num_threads=1``, one BLAS thread for numpy), the two interleaved in rounds;
the table gives the median round of each (ms per forward) and their ratio, twice: in
wall-clock time, and in CPU time (``time.process_time``: the time this process computed,
without the time the operating system gave other programs -- on a shared machine the
steadier of the two; both run on one thread, so for both it is the work done). The
course's target for the convolution kernels (im2col and one BLAS product per chunk) is
at most 2x onnxruntime; the table says how far each network is from it. A third column,
"products", times the network's convolutions' matrix products alone (one ``np.matmul`` per
convolution, the shapes the compiled program multiplies, nothing else), interleaved in the
same rounds: the part of hybridlab's time that is BLAS's, so what is left above it is
im2col, the bias, the activations, pooling and concatenation.

    python3 benchmarks/onnx_networks.py [--models squeezenet resnet50] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hybridlab as mx
from hybridlab import engine, nd


def per_call(run, calls: int) -> tuple[float, float]:
    """Seconds per call: (wall clock, CPU time of this process)."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls, (time.process_time() - cpu) / calls


def measure(name: str, rounds: int, calls: int) -> dict[str, tuple[float, float]]:
    """{clock: (hybridlab's median, onnxruntime's median)} for "wall" and "cpu"."""
    import onnx
    import onnxruntime as ort
    from threadpoolctl import threadpool_limits

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")
    (data, shape), = mx.contrib.onnx.get_model_metadata(path)["input_tensor_data"]
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    with engine.engine_scope(engine.NaiveEngine()), threadpool_limits(1, user_api="blas"):
        net = mx.contrib.onnx.import_to_gluon(path)
        array = nd.array(x)
        net(array).wait_to_read()  # compile once
        runs = {"hybridlab": lambda: net(array).wait_to_read(),
                "onnxruntime": lambda: session.run(None, {data: x}),
                "products": products(net._cached_op.last_program.graph)}
        samples: dict[str, list[tuple[float, float]]] = {key: [] for key in runs}
        for index in range(rounds):  # rotating order: neither always goes first
            for key in list(runs)[index % 3:] + list(runs)[:index % 3]:
                samples[key].append(per_call(runs[key], calls))
    return {clock: tuple(statistics.median(s[i] for s in samples[key])  # type: ignore[misc]
                         for key in ("hybridlab", "onnxruntime", "products"))
            for i, clock in enumerate(("wall", "cpu"))}


def products(graph):
    """A function running one ``np.matmul`` per Convolution of ``graph``: ``(F, C*kh*kw)``
    by ``(C*kh*kw, OH*OW)`` per group, on random arrays made once (BLAS's share)."""
    rng, operands = np.random.default_rng(0), []
    for node in graph.nodes:
        if node.kind == "call" and node.op == "Convolution":
            (n, filters, height, width), groups = node.aval[0].shape, node.attr_dict["num_group"]
            depth = int(np.prod(node.inputs[1].aval.shape[1:]))
            for _ in range(n * groups):
                operands.append((rng.random((filters // groups, depth), np.float32),
                                 rng.random((depth, height * width), np.float32),
                                 np.empty((filters // groups, height * width), np.float32)))

    def run():
        for a, b, out in operands:
            np.matmul(a, b, out=out)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["squeezenet", "resnet50"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    from threadpoolctl import threadpool_info

    kernel = next((i.get("architecture") for i in threadpool_info()
                   if i["user_api"] == "blas"), "?")
    print(f"one thread each; BLAS kernel {kernel}; medians of {args.rounds} interleaved rounds")
    print(f"{'network':<14}{'clock':<6}{'hybridlab ms':>14}{'onnxruntime ms':>16}{'ratio':>8}"
          f"  target <= 2x{'products ms':>13}{'/ onnxruntime':>15}")
    for name in args.models:
        for clock, (ours, theirs, blas) in measure(name, args.rounds, args.calls).items():
            ratio = ours / theirs
            print(f"{name:<14}{clock:<6}{ours * 1e3:>14.1f}{theirs * 1e3:>16.1f}{ratio:>7.2f}x  "
                  f"{'met   ' if ratio <= 2 else 'MISSED'}{blas * 1e3:>17.1f}"
                  f"{blas / theirs:>14.2f}x")


if __name__ == "__main__":
    main()
