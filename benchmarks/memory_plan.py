"""How much memory does planning save on a training step? (forward + backward graph)

Run from the repository root: ``PYTHONPATH=. python3 benchmarks/memory_plan.py``.
For the seeds' MLP (512->256->128->2) and a LeNet-style conv net (1x28x28), at batch
64 and 1024, build the joint forward+backward graph (``graph.autodiff``), keep the
parameter gradients as outputs, run the pass pipeline and print the plan's numbers
(all describe the ``static_alloc`` program codegen writes for that graph):

* unplanned: every result and every kernel's workspace in a buffer of its own, none
  freed (views own nothing);
* planned:   what the program holds at its peak: the arena allocated once, plus what
  its kernels allocate at the worst step (outputs, values left out of the arena, and the
  workspace of the step: im2col matrices, padded copies -- ``OpDef.workspace``);
* bound:     the most bytes live at one step (in-place writes aside, no plan does better);
* measured:  the program really run, its peak traced by ``tracemalloc`` (numpy reports
  every array it allocates) plus its arena: it checks that ``planned`` is honest. It
  runs ~0.1 MB above ``planned``: numpy's ufunc iteration buffers (``np.getbufsize()``
  elements per strided operand), which no declaration counts;
* workspace: the largest scratch one kernel takes (LeNet: a chunk of im2col, bounded
  by ops/conv.py whatever the batch).

Targets: planned <= 1.1 x bound and planned <= 0.5 x unplanned. The second cannot be
met when the results themselves (the parameter gradients, which must all exist when
the step ends) are more than half the bytes: the ``outp/unpl`` column shows that share,
a floor under ``plan/unpl`` for any plan, and the table says where it rules the target
out. The ``(no outputs)`` column is the ratio for the intermediates alone. Ops that
return views (a reshape) save the most when the registry says so (``OpDef.view``); an
op that might return a view of its input *pins* that input out of the arena (see
graph/passes/plan_memory.py).
"""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np

from hybridlab.graph import autodiff, ir
from hybridlab.graph.codegen import compile_graph
from hybridlab.graph.passes import run_pipeline
from hybridlab.ops import Aval

F32 = np.dtype("float32")
# The parameter gradients are a fixed cost; the intermediates grow with the batch, so the
# share that planning can save grows with it too.
BATCHES = (64, 1024)


def _param(name: str, *shape: int) -> ir.Node:
    return ir.var(name, Aval(shape, F32))


def mlp(batch: int = 64) -> ir.Graph:
    data = ir.var("data", Aval((batch, 512), F32))
    nodes, value = [data], data.out()
    for i, (width, fan_in) in enumerate([(256, 512), (128, 256), (2, 128)]):
        weight, bias = _param(f"fc{i}_weight", width, fan_in), _param(f"fc{i}_bias", width)
        nodes += [weight, bias]
        value = ir.call("FullyConnected", [value, weight.out(), bias.out()],
                        {"num_hidden": width}, name=f"fc{i}").out()
        if i < 2:
            value = ir.call("relu", [value], name=f"relu{i}").out()
    return ir.Graph.from_outputs([value], nodes)


def lenet(batch: int = 64) -> ir.Graph:
    data = ir.var("data", Aval((batch, 1, 28, 28), F32))
    nodes, value = [data], data.out()
    for i, (filters, channels) in enumerate([(6, 1), (16, 6)]):
        weight = _param(f"conv{i}_weight", filters, channels, 5, 5)
        bias = _param(f"conv{i}_bias", filters)
        nodes += [weight, bias]
        value = ir.call("Convolution", [value, weight.out(), bias.out()],
                        {"kernel": (5, 5), "num_filter": filters}, name=f"conv{i}").out()
        value = ir.call("relu", [value], name=f"crelu{i}").out()
        value = ir.call("Pooling", [value], {"kernel": (2, 2), "stride": (2, 2),
                                             "pool_type": "max"}, name=f"pool{i}").out()
    value = ir.call("Flatten", [value], name="flatten0").out()
    for i, (width, fan_in) in enumerate([(120, 256), (10, 120)]):
        weight, bias = _param(f"fc{i}_weight", width, fan_in), _param(f"fc{i}_bias", width)
        nodes += [weight, bias]
        value = ir.call("FullyConnected", [value, weight.out(), bias.out()],
                        {"num_hidden": width}, name=f"fc{i}").out()
        if i == 0:
            value = ir.call("relu", [value], name="frelu0").out()
    return ir.Graph.from_outputs([value], nodes)


def training_step(graph: ir.Graph) -> ir.Graph:
    """Forward + backward, returning the loss head and the *parameter* gradients only."""
    joint = autodiff.gradient_graph(graph)
    param_grads = joint.outputs[len(graph.outputs) + 1:]  # input 0 is the data
    # keep the joint graph's schedule; dead-code elimination drops the data gradient
    return ir.Graph(joint.nodes, joint.inputs, joint.outputs[:len(graph.outputs)] + param_grads)


def measured_peak(graph: ir.Graph) -> int:
    """Run the static program once and return its real peak: arena + traced allocations."""
    program = compile_graph(graph, static_alloc=True, name="step")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n.aval[0].shape).astype(n.aval[0].dtype)
              for n in graph.inputs]
    program(*arrays)  # warm-up
    tracemalloc.start()
    try:
        program(*arrays)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return sum(b.nbytes for b in program.buffers) + peak


def main() -> None:
    print(f"{'model':<8}{'batch':>6}{'unplanned':>12}{'planned':>12}{'measured':>12}"
          f"{'bound':>12}{'outputs':>12}{'workspace':>11}{'plan/bound':>11}{'plan/unpl':>10}"
          f"{'outp/unpl':>10}{'(no outputs)':>13}{'arena':>12}{'in place':>9}")
    unreachable = []
    for (name, build), batch in itertools.product([("MLP", mlp), ("LeNet", lenet)], BATCHES):
        optimised, _ = run_pipeline(training_step(build(batch)), verify=True)
        plan = optimised.meta["memory"]
        # the results (loss head, parameter gradients) must all exist at the end: no plan
        # can share them, so the (no outputs) column compares the intermediates alone
        outputs = sum(int(np.prod(v.aval.shape)) * v.aval.dtype.itemsize
                      for v in optimised.outputs if v.node.kind == "call")
        inner = (plan.planned - outputs) / (plan.unplanned - outputs)
        print(f"{name:<8}{batch:>6}{plan.unplanned:>12,}{plan.planned:>12,}"
              f"{measured_peak(optimised):>12,}{plan.bound:>12,}{outputs:>12,}"
              f"{plan.workspace:>11,}{plan.planned / plan.bound:>11.3f}"
              f"{plan.planned / plan.unplanned:>10.3f}{outputs / plan.unplanned:>10.3f}"
              f"{inner:>13.3f}{plan.buffer_bytes[0]:>12,}{plan.inplace:>9}")
        if outputs > 0.5 * plan.unplanned:
            unreachable.append(f"{name} {batch}: the outputs alone (the parameter gradients "
                               f"the caller keeps) are {outputs / plan.unplanned:.3f} x "
                               f"unplanned, so planned <= 0.5 x unplanned is out of reach "
                               f"for any plan")
    print("\n".join(unreachable))


if __name__ == "__main__":
    main()
