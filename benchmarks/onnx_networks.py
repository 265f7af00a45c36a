"""Real networks, imported from ONNX: hybridlab hybridized against onnxruntime, batch 1.

The light models onnx ships (SqueezeNet, ResNet-50, ... ; their weight values do not
change the work) are read with ``mx.contrib.onnx.import_to_gluon``, hybridized, and timed
against onnxruntime on the same input, both on one thread (onnxruntime's
``intra_op_num_threads=1``, one BLAS thread for numpy), the two interleaved in rounds;
the table gives the median round of each (ms per forward) and their ratio, twice: in
wall-clock time, and in CPU time (``time.process_time``: the time this process computed,
without the time the operating system gave other programs -- on a shared machine the
steadier of the two; both run on one thread, so for both it is the work done). The
table says how far each network is from its target. A third column,
"products", times the network's convolutions' matrix products alone (one ``np.matmul`` per
convolution, the shapes the compiled program multiplies, nothing else), interleaved in the
same rounds: the part of hybridlab's time that is BLAS's, so what is left above it is
im2col, the bias, the activations, pooling and concatenation.

The convolutions are computed by the algorithms measured fastest on the first call
(``graph/passes/choose_convolutions.py``: im2col, Winograd F(2x2, 3x3), direct
depthwise); the table says how many each took, and the products column multiplies as
each algorithm does. Targets: at most 1.5x onnxruntime for ResNet-50 and VGG-19, 2x for
the others.

    python3 benchmarks/onnx_networks.py [--models squeezenet resnet50] [--rounds 7]
"""

from __future__ import annotations

import argparse
import collections
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


def measure(name: str, rounds: int, calls: int) -> tuple[dict[str, tuple[float, ...]], str]:
    """{clock: (hybridlab's, onnxruntime's, the products' medians)} for "wall" and "cpu",
    and the algorithms the convolutions were computed with."""
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
    return {clock: tuple(statistics.median(s[i] for s in samples[key])
                         for key in ("hybridlab", "onnxruntime", "products"))
            for i, clock in enumerate(("wall", "cpu"))}, algorithms(net)


def products(graph):
    """A function running the matrix products of ``graph``'s convolutions, as each
    algorithm multiplies (im2col: one ``(F, C*kh*kw) @ (C*kh*kw, OH*OW)`` per image and
    group; Winograd: 16 ``(F, C) @ (C, tiles)``; depthwise: one stacked product over the
    channels), on random arrays made once: BLAS's share of the forward."""
    rng, operands = np.random.default_rng(0), []
    for node in graph.nodes:
        if node.kind != "call" or node.op not in ("Convolution", "_conv_winograd",
                                                  "_conv_depthwise"):
            continue
        (n, filters, height, width), groups = node.aval[0].shape, node.attr_dict["num_group"]
        weight = node.inputs[1].aval.shape
        if node.op == "_conv_winograd":
            tiles = n * -(-height // 2) * -(-width // 2)
            shapes = [((16, filters, weight[2]), (16, weight[2], tiles))]
        elif node.op == "_conv_depthwise":
            taps = int(np.prod(weight[2:]))
            shapes = [((1, filters, 1, taps), (n, filters, taps, height * width))]
        else:
            depth = int(np.prod(weight[1:]))
            shapes = [((filters // groups, depth), (depth, height * width))] * (n * groups)
        for a, b in shapes:
            operands.append((rng.random(a, np.float32), rng.random(b, np.float32)))

    def run():
        for a, b in operands:
            np.matmul(a, b)
    return run


def algorithms(net) -> str:
    """How many convolutions each algorithm computes (graph/passes/choose_convolutions.py)."""
    chosen = collections.Counter(c.chosen for c in net._cached_op.convolutions().values())
    return ", ".join(f"{name} {count}" for name, count in sorted(chosen.items())) or "im2col"


MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]
TARGETS = {"resnet50": 1.5, "vgg19": 1.5}  # all 3x3 or nearly: the others at most 2x


def machine() -> str:
    """The CPU's model name and numpy's BLAS with the kernel it chose."""
    from threadpoolctl import threadpool_info

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?") if os.path.exists("/proc/cpuinfo") \
        else "?"
    blas = ", ".join(f"{i['internal_api']} {i['version']} {i.get('architecture', '?')}"
                     for i in threadpool_info() if i["user_api"] == "blas")
    return f"{cpu}; BLAS {blas}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    print(f"{machine()}; one thread each; medians of {args.rounds} interleaved rounds; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'network':<14}{'clock':<6}{'hybridlab ms':>14}{'onnxruntime ms':>16}{'ratio':>8}"
          f"  {'target':<12}{'products ms':>13}{'/ onnxruntime':>15}")
    for name in args.models:
        times, chosen = measure(name, args.rounds, args.calls)
        target = TARGETS.get(name, 2.0)
        for clock, (ours, theirs, blas) in times.items():
            ratio = ours / theirs
            verdict = f"{'met' if ratio <= target else 'MISSED'} <= {target:g}x"
            print(f"{name:<14}{clock:<6}{ours * 1e3:>14.1f}{theirs * 1e3:>16.1f}{ratio:>7.2f}x  "
                  f"{verdict:<12}{blas * 1e3:>13.1f}{blas / theirs:>14.2f}x")
        print(f"{'':<14}convolutions: {chosen}")


if __name__ == "__main__":
    main()
