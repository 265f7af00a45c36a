"""Exercise checks and helpers for lesson 09 (real networks).

The networks are the light models the ``onnx`` package ships as backend test data
(``onnx/backend/test/data/light``): AlexNet ... ZFNet-512 at batch 1, 224 x 224. Every
weight in those files is the constant 0.02, so their output does not depend on the
input; :func:`light_model` gives each weight random values (He-scaled kernels, positive
vectors so BatchNorm's variances stay valid) and drops the final Softmax, so the logits
compared with onnxruntime depend on the input. Models are read once per process.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import Feedback, judge_ratio, run

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")


def light_path(name: str) -> str:
    """The path of ``light_<name>.onnx`` in the installed ``onnx`` package."""
    import onnx

    if name not in LIGHT_MODELS:
        raise ValueError(f"{name!r} is not one of the light models: {LIGHT_MODELS}")
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")


@functools.cache
def light_model(name: str, seed: int = 0) -> Any:
    """The light model ``name`` (a ``ModelProto``) with random weights and its final
    Softmax dropped (its output: the logits)."""
    import onnx

    return randomized(onnx.load(light_path(name)), seed)


def randomized(model: Any, seed: int = 0) -> Any:
    """A copy of the ONNX ``model`` with a random value for every weight it computes
    (He-scaled kernels, positive vectors: BatchNorm's variances stay valid) and without
    its final Softmax, so its output depends on its input."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    stored = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in stored:
            shape = tuple(int(d) for d in stored[node.input[0]])
            values = (rng.normal(0, np.sqrt(2 / np.prod(shape[1:])), shape) if len(shape) > 1
                      else rng.uniform(0.5, 1.5, shape))
            node = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                    value=numpy_helper.from_array(values.astype(np.float32)))
        nodes.append(node)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if nodes[-1].op_type == "Softmax":
        copy.graph.output[0].name = nodes.pop().input[0]
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy


def onnxruntime_session(model: Any, optimize: bool = True) -> Any:
    """An onnxruntime session on one thread (within and between operators) for a
    ``ModelProto`` or a path, with onnxruntime's graph optimisations on (its default:
    constant folding, Conv+BatchNorm and Conv+activation fusions, layout changes) or off
    (``optimize=False``: the graph as written). Its warnings about the unused shape
    constants the light models keep are silenced."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if not optimize:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


@functools.cache
def imported(name: str) -> tuple[Any, dict, dict, str, tuple[int, ...]]:
    """``(sym, arg_params, aux_params, input name, input shape)`` of :func:`light_model`."""
    from hybridlab.onnx import get_model_metadata, import_model

    model = light_model(name)
    sym, args, aux = import_model(model)
    (data, shape), = get_model_metadata(model)["input_tensor_data"]
    return sym, args, aux, data, tuple(shape)


def shapes(name: str) -> dict[str, tuple[int, ...]]:
    """Every input's shape (the data's and each parameter's), for the instruments' ``shape=``:
    an imported BatchNorm's scale read by a ``broadcast_mul`` cannot be inferred."""
    _, args, aux, data, shape = imported(name)
    return {data: shape, **{k: tuple(v.shape) for k, v in {**args, **aux}.items()}}


def typed_graph(name: str) -> Any:
    """The imported network's graph IR with every type inferred (batch 1)."""
    from hybridlab.lab.graphs import as_graph

    return as_graph(imported(name)[0], shapes(name))[0]


def check_dense_concat_bytes(answer: int) -> Feedback:
    """DenseNet-121 at batch 1: how many bytes is the concatenation that ends its second
    dense block (``conv3_12``: the block's input and the features all twelve of its
    layers added), in float32?"""
    from hybridlab.lab.graphs import blocks

    block = next(b for b in blocks(typed_graph("densenet121"), most=1000) if b.name == "conv3_12")
    aval = block.nodes[-1].aval[0]
    expected = int(np.prod(aval.shape)) * aval.dtype.itemsize
    if answer == expected:
        return Feedback(True, f"{expected} bytes: {aval.shape[1]} channels of "
                              f"{aval.shape[2]} x {aval.shape[3]}, 4 bytes each -- and every "
                              "layer of the block reads all of it")
    if not isinstance(answer, (int, np.integer)) or isinstance(answer, bool):
        return Feedback(False, f"give a whole number of bytes, not {answer!r}")
    channels = aval.shape[1]
    per_channel = aval.shape[2] * aval.shape[3] * 4
    if answer % per_channel == 0:
        return Feedback(False, f"you counted {answer // per_channel} channels of "
                               f"{aval.shape[2]} x {aval.shape[3]}; the block's input has "
                               f"{channels - 12 * 32} and each of its 12 layers adds 32 (the "
                               "growth rate): count them all")
    if answer * 4 == expected:
        return Feedback(False, "right count of numbers, but a float32 takes 4 bytes")
    return Feedback(False, f"you predicted {answer} bytes, the graph says {expected}: a "
                           "concatenation of C channels of H x W floats is C x H x W x 4 "
                           "bytes; the second block runs at 28 x 28")


def check_inception_speedup(prediction: float, workers: int = 4) -> Feedback:
    """Inception v1, one unit of time per operator: predict the list schedule's speed-up
    on ``workers`` workers over one worker; judged on the effect (the speed-up minus 1),
    which must be less than a factor 1.5 off: the schedule is a model, computed exactly."""
    from hybridlab.lab.schedule import ScheduleModel, TaskGraph

    model = ScheduleModel(TaskGraph.from_graph(imported("inception_v1")[0]), workers)
    numbers = model.numbers()
    speedup = numbers["work"] / numbers["makespan"]
    facts = (f"work {numbers['work']:g}, span {numbers['span']:g}: no schedule beats "
             f"W / S = {numbers['work'] / numbers['span']:.2f}, and {workers} workers reach "
             f"{speedup:.2f}")
    if not isinstance(prediction, (int, float)) or isinstance(prediction, bool):
        return Feedback(False, f"give a number (a speed-up), not {prediction!r}")
    judgement = judge_ratio(float(prediction), speedup, within=1.5)
    if judgement.correct:
        return Feedback(True, f"{facts} (yours is {judgement.off})")
    bound = (f"work {numbers['work']:g} and span {numbers['span']:g}: no schedule beats "
             f"W / S = {numbers['work'] / numbers['span']:.2f}")
    hint = ("more than the span allows: the stem and the head are one chain, and each "
            "inception block is only four branches wide" if prediction > speedup else
            "less than it is: each inception block runs its four branches side by side")
    return Feedback(False, f"you predicted {prediction:g}, which is {hint} ({bound}); the "
                           "schedule's own figure shows once your prediction is close "
                           "(less than a factor 1.5 off in its effect, the speed-up minus 1)")


def check_residual_sums(count_sums: Callable[[Any], int]) -> Feedback:
    """``count_sums(graph)`` must count the residual sums of a graph IR: additions of two
    computed results (not of a result and a weight, as an imported BatchNorm's bias)."""
    from hybridlab import sym

    F: Any = sym  # the operators, generated from the registry
    x = F.var("x")
    toy = F.elemwise_add(F.relu(x), F.exp(F.relu(x))).to_graph()
    cases = [("a toy with one skip connection", toy, 1)]
    cases += [(name, typed_graph(name), count) for name, count in
              (("resnet50", 16), ("densenet121", 0), ("inception_v1", 0))]
    for what, graph, expected in cases:
        got, error = run(functools.partial(count_sums, graph), f"count_sums on {what}")
        if error is not None:
            return error
        if got != expected:
            extra = (" -- DenseNet's broadcast_add nodes add a BatchNorm's bias (a weight) "
                     "to a result: not a residual sum" if what == "densenet121" else "")
            return Feedback(False, f"on {what} you count {got}, the graph has {expected}"
                                   f"{extra}")
    return Feedback(True, "ResNet-50's sixteen skip connections, and none in the others")
