"""What folding BatchNorm into the convolutions saves on real networks, batch 1, inference.

The light models onnx ships (ResNet-50, DenseNet-121; their weight values do not change
the work) are imported with ``mx.contrib.onnx.import_to_gluon`` and hybridized twice: the
default pipeline, and the same with ``disabled_passes=["fold_batchnorm"]``. For each, the
table gives the operator calls of the compiled forward program, the BatchNorms folded,
and the median forward time (one BLAS thread, the naive engine, the two interleaved in
rounds in rotating order), in wall-clock and in CPU time (``time.process_time``, the
steadier on a shared machine); then the ratio folded / unfolded. The first call, which makes
the folded weights, is not timed (it is paid once per weight buffer). That the two
programs compute the same logits is a test (``tests/graph/test_fold_batchnorm.py``, on
ResNet-50 with random weights: these files' constant weights would prove nothing).

    python3 benchmarks/bn_fold.py [--models resnet50 densenet121] [--rounds 7] [--calls 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onnx_networks import per_call  # (this folder is the script's: on sys.path)

import hybridlab as mx
from hybridlab import engine, nd


def calls_of(net) -> int:
    graph = net._cached_op.last_program.graph
    return sum(1 for node in graph.nodes if node.kind == "call")


def measure(name: str, rounds: int, calls: int) -> dict:
    import onnx
    from threadpoolctl import threadpool_limits

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")
    (_, shape), = mx.contrib.onnx.get_model_metadata(path)["input_tensor_data"]
    x = nd.array(np.random.default_rng(0).normal(size=shape).astype(np.float32))
    ways = {"folded": (), "unfolded": ("fold_batchnorm",)}
    with engine.engine_scope(engine.NaiveEngine()), threadpool_limits(1, user_api="blas"):
        nets = {}
        for way, disabled in ways.items():
            nets[way] = mx.contrib.onnx.import_to_gluon(path)
            nets[way].hybridize(disabled_passes=disabled, autotune=False)
            nets[way](x).wait_to_read()  # compile, and make the folded weights
        runs = {way: (lambda net=net: net(x).wait_to_read()) for way, net in nets.items()}
        samples: dict[str, list[tuple[float, float]]] = {way: [] for way in runs}
        for index in range(rounds):  # rotating order: neither always goes first
            for way in list(runs)[index % 2:] + list(runs)[:index % 2]:
                samples[way].append(per_call(runs[way], calls))
    folded = sum(n.name.endswith("_weight__folded")
                 for n in nets["folded"]._cached_op.last_program.graph.inputs)
    return {"calls": {way: calls_of(net) for way, net in nets.items()}, "folded": folded,
            "ms": {(way, clock): statistics.median(t[i] for t in s) * 1e3
                   for way, s in samples.items() for i, clock in enumerate(("wall", "cpu"))}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "densenet121"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    print(f"batch 1, one BLAS thread, naive engine; medians of {args.rounds} interleaved rounds "
          f"of {args.calls} calls")
    print(f"{'network':<13}{'folds':>6}{'calls unfolded':>16}{'folded':>8}  {'clock':<6}"
          f"{'ms unfolded':>12}{'folded':>9}{'ratio':>8}")
    for name in args.models:
        r = measure(name, args.rounds, args.calls)
        for clock in ("wall", "cpu"):
            unfolded, folded = r["ms"][("unfolded", clock)], r["ms"][("folded", clock)]
            print(f"{name:<13}{r['folded']:>6}{r['calls']['unfolded']:>16}"
                  f"{r['calls']['folded']:>8}  {clock:<6}{unfolded:>12.1f}{folded:>9.1f}"
                  f"{folded / unfolded:>7.2f}x")


if __name__ == "__main__":
    main()
