"""Exercise checks for lesson 08 (export and deployment)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import Feedback

# What the interpreter exercise asks for: MXNet's operator names (and the ones hybridlab's
# own layers write), each with numpy
INTERPRETER_OPS = ("FullyConnected", "Activation", "relu", "sigmoid", "tanh", "Flatten",
                   "elemwise_add", "broadcast_add")


def mxnet_model(name: str = "mlp") -> Path:
    """The folder of a model exported by real MXNet 1.9.1 (``model-symbol.json``,
    ``model-0000.params``, and ``io.npz`` with an input ``x`` and MXNet's output ``y``):
    the test fixtures of a hybridlab checkout."""
    for base in (Path(__file__).resolve().parents[2], Path.cwd(), *Path.cwd().parents):
        folder = base / "tests" / "fixtures" / "mxnet" / name
        if (folder / "model-symbol.json").exists():
            return folder
    raise FileNotFoundError(f"the MXNet model {name!r} ships with a hybridlab checkout "
                            f"(tests/fixtures/mxnet/{name}); run the lesson from one (make lab)")


def dense_export(folder: str) -> str:
    """Export ``Dense(4)`` on 3 inputs (prefix ``fc_``) into ``folder``; the prefix."""
    from hybridlab import ndarray as nd
    from hybridlab.gluon import nn

    layer = nn.Dense(4, in_units=3, prefix="fc_")
    layer.initialize()
    layer.hybridize()
    layer(nd.ones((1, 3)))
    prefix = os.path.join(folder, "fc")
    layer.export(prefix)
    return prefix


def check_params_size(answer: int) -> Feedback:
    """How many bytes is the ``.params`` file ``export`` writes for ``Dense(4)`` on 3 inputs
    (``prefix="fc_"``: a float32 weight (4, 3) and bias (4,), keys ``arg:fc_weight`` and
    ``arg:fc_bias``)?"""
    with tempfile.TemporaryDirectory() as folder:
        expected = os.path.getsize(dense_export(folder) + "-0000.params")
    if answer == expected:
        return Feedback(True, f"{expected} bytes: 24 of file header, 28 + 8 x ndim of header "
                              "per array before its data, the data (4 bytes a float), then "
                              "the names, each with its 8-byte length")
    if not isinstance(answer, int) or isinstance(answer, bool):
        return Feedback(False, f"give a whole number of bytes, not {answer!r}")
    off = answer - expected
    data = (4 * 3 + 4) * 4  # the float32 weight and bias
    names = sum(8 + len(k) for k in ("arg:fc_weight", "arg:fc_bias"))
    hints = {-data: "the data: 16 float32 numbers, 4 bytes each",
             -names: "the names: each is its 8-byte length, then its characters",
             -8: "one 8-byte count: the number of names (or of arrays)",
             -(data * 3 // 4): "the data are float32: 4 bytes a number, not 1",
             -24: "the file header: magic, reserved and the number of arrays, 8 bytes each",
             -2 * 28 - 8 * 3: "the array headers: magic, storage type, ndim, 8 bytes per "
                              "dimension, device type and id, dtype flag"}
    why = hints.get(off, "add the file header (three 8-byte numbers), per array its header "
                         "(magic, storage type, ndim: 4 bytes each; 8 per dimension; device "
                         "type and id; dtype flag) and its data, then the number of names and "
                         "each name with its 8-byte length")
    return Feedback(False, f"you predicted {answer} bytes; the file has {expected} "
                           f"({abs(off)} {'too many' if off > 0 else 'too few'}): "
                           f"{'missing: ' if off < 0 and off in hints else ''}{why}")


def _models() -> list[tuple[str, str, dict[str, np.ndarray], np.ndarray, np.ndarray]]:
    """(what, JSON text, parameters by name, input, expected output) for the check."""
    from hybridlab import ndarray as nd
    from hybridlab import random
    from hybridlab.gluon import nn

    folder = mxnet_model("mlp")
    io = np.load(folder / "io.npz")
    mxnet_params = {k.partition(":")[2]: v.asnumpy()
                    for k, v in nd.load(str(folder / "model-0000.params")).items()}  # type: ignore[union-attr]
    models = [("the MLP exported by MXNet 1.9.1", (folder / "model-symbol.json").read_text(),
               mxnet_params, io["x"], io["y"])]
    random.seed(8)
    net = nn.HybridSequential()
    net.add(nn.Dense(6, activation="tanh"), nn.Dense(5, activation="sigmoid"), nn.Dense(2))  # type: ignore[misc]
    net.initialize()
    net.hybridize()
    x = nd.random.normal(shape=(3, 2, 2))  # 3-D: FullyConnected flattens it
    y = net(x).asnumpy()
    with tempfile.TemporaryDirectory() as tmp:
        net.export(os.path.join(tmp, "net"))
        text = Path(tmp, "net-symbol.json").read_text()
        params = {k.partition(":")[2]: v.asnumpy()
                  for k, v in nd.load(os.path.join(tmp, "net-0000.params")).items()}  # type: ignore[union-attr]
    models.append(("a hybridlab export with tanh and sigmoid on 3-D data", text, params,
                   x.asnumpy(), y))
    return models


def check_json_interpreter(run_json: Callable[[str, dict, np.ndarray], Any]) -> Feedback:
    """``run_json(json_text, params, data)`` must compute the exported graph's output with
    numpy alone: the MXNet MLP of the lesson, and a hybridlab export with other activations."""
    for what, text, params, data, expected in _models():
        try:
            got = np.asarray(run_json(text, dict(params), data.copy()))
        except Exception as exc:  # the student's code: explain, do not raise
            ops = sorted({n["op"] for n in json.loads(text)["nodes"]} - {"null"})
            return Feedback(False, f"on {what} your interpreter raised {type(exc).__name__}: "
                                   f"{exc} (its operators: {ops})")
        if got.shape != expected.shape:
            return Feedback(False, f"on {what}: shape {got.shape}, expected {expected.shape}")
        if not np.allclose(got, expected, rtol=1e-4, atol=1e-5):
            return Feedback(False, f"on {what}: the numbers differ (largest difference "
                                   f"{np.abs(got - expected).max():.3g}); check "
                                   "FullyConnected's x . W^T + b and its flatten")
    return Feedback(True, "your interpreter runs both exports: the JSON and the parameters "
                          "are the whole model, readable without the framework")


def check_onnx_batch(onnx_path: str, net: Any, features: int = 5) -> Feedback:
    """The ONNX file at ``onnx_path`` (exported from the hybridized ``net``) must run in
    onnxruntime on a batch of any size -- 1 and 7 are tried -- and compute ``net``'s
    outputs."""
    import onnxruntime

    from hybridlab import ndarray as nd

    try:
        session = onnxruntime.InferenceSession(str(onnx_path),
                                               providers=["CPUExecutionProvider"])
    except Exception as exc:  # not a file onnxruntime can load: explain, do not raise
        return Feedback(False, f"onnxruntime cannot load {onnx_path!r}: {exc}")
    name = session.get_inputs()[0].name
    for batch in (1, 7):
        x = np.random.default_rng(batch).standard_normal((batch, features)).astype(np.float32)
        try:
            (got,) = session.run(None, {name: x})
        except Exception as exc:
            return Feedback(False, f"a batch of {batch} does not run ({type(exc).__name__}): "
                                   "was the batch dimension left free? export with "
                                   "dynamic=True and dynamic_input_shapes=[(None, ...)]")
        if not np.allclose(got, net(nd.array(x)).asnumpy(), rtol=1e-4, atol=1e-5):
            return Feedback(False, f"a batch of {batch} runs but computes something else "
                                   "than the network: export the network's own parameters")
    return Feedback(True, "one file, any batch size, the network's numbers, no hybridlab")
