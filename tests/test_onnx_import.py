"""ONNX import (``mx.contrib.onnx``): real networks against onnxruntime, opsets, errors.

The light models onnx ships (AlexNet ... ZFNet-512) hold every weight as the constant 0.02,
so their softmax does not depend on the input: matching onnxruntime on them as shipped
would prove nothing. :func:`randomized` gives each weight random values (He-scaled
kernels, positive vectors, so BatchNorm variances stay valid) and drops the final
Softmax, so the logits -- which do depend on the input -- are compared.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import hybridlab as mx  # noqa: E402
from hybridlab import nd  # noqa: E402
from hybridlab.errors import OnnxImportError  # noqa: E402
from hybridlab.exercises.lesson09 import randomized  # noqa: E402  (the lesson's own helper)

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def run_onnxruntime(model, feed):
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the light models keep unused shape initializers
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


# every model as shipped (opset 9) and converted to opset 13 (Unsqueeze, Softmax, Dropout,
# Clip change meaning there); three converted to 18 as well
CASES = ([(name, 9) for name in MODELS] + [(name, 13) for name in MODELS]
         + [(name, 18) for name in ("bvlc_alexnet", "inception_v1", "squeezenet")])


@pytest.mark.parametrize("name,opset", CASES)
def test_a_real_network_computes_onnxruntimes_logits(name, opset):
    model = randomized(onnx.load(os.path.join(LIGHT, f"light_{name}.onnx")))
    if opset != 9:
        model = onnx.version_converter.convert_version(model, opset)
    (data, shape), = mx.contrib.onnx.get_model_metadata(model)["input_tensor_data"]
    x = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    expected = run_onnxruntime(model, {data: x})
    net = mx.contrib.onnx.import_to_gluon(model)
    got = net(nd.array(x)).asnumpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
    assert np.std(expected) > 0  # the logits depend on the weights: a real comparison


def test_import_model_gives_mxnets_three_parts_with_batchnorm_statistics_as_aux():
    model = randomized(onnx.load(os.path.join(LIGHT, "light_resnet50.onnx")))
    sym, args, aux = mx.contrib.onnx.import_model(model)
    assert set(sym.list_auxiliary_states()) == set(aux) and len(aux) == 2 * 53
    assert set(sym.list_arguments()) == set(args) | {"gpu_0/data_0"}
    assert all(isinstance(v, nd.NDArray) for v in [*args.values(), *aux.values()])
    ops = [n["op"] for n in __import__("json").loads(sym.tojson())["nodes"]]
    assert ops.count("BatchNorm") == 53 and ops.count("Convolution") == 53


def test_a_hybridlab_export_reads_back_and_exports_again(tmp_path):
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, padding=1, activation="relu"), nn.MaxPool2D(),
            nn.BatchNorm(), nn.Dense(3))
    net.initialize()
    x = nd.random.normal(shape=(2, 1, 6, 6))
    net.hybridize()
    expected = net(x).asnumpy()
    first = mx.onnx.export_model(net, None, [(2, 1, 6, 6)], np.float32,
                                 str(tmp_path / "first.onnx"))
    sym, args, aux = mx.contrib.onnx.import_model(first)
    back = mx.contrib.onnx.import_to_gluon(first)
    np.testing.assert_allclose(back(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    second = mx.onnx.export_model(sym, {**args, **aux}, [(2, 1, 6, 6)], np.float32,
                                  str(tmp_path / "second.onnx"))
    ops = [[n.op_type for n in onnx.load(path).graph.node] for path in (first, second)]
    assert ops[0] == ops[1]
    feed = {onnx.load(second).graph.input[0].name: x.asnumpy()}
    np.testing.assert_allclose(run_onnxruntime(onnx.load(second), feed), expected,
                               rtol=1e-5, atol=1e-6)


def test_an_operator_without_a_rule_names_the_node_and_the_operator():
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Hardmax", ["x"], ["y"], name="the_node")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"'the_node' \(Hardmax, opset 13\).*no import "
                                              r"rule"):
        mx.contrib.onnx.import_model(model)


def test_a_file_that_is_not_a_model_is_a_clear_error(tmp_path):
    path = tmp_path / "not.onnx"
    path.write_bytes(b"\x00\xff not protobuf at all")
    with pytest.raises(OnnxImportError, match="not an ONNX model"):
        mx.contrib.onnx.import_model(str(path))


def test_metadata_lists_the_data_inputs_not_the_weights():
    meta = mx.contrib.onnx.get_model_metadata(os.path.join(LIGHT, "light_squeezenet.onnx"))
    assert meta["input_tensor_data"] == [("data_0", (1, 3, 224, 224))]
    assert meta["output_tensor_data"] == [("softmaxout_1", (1, 1000, 1, 1))]


def test_mxnets_spelling_works():
    from hybridlab.contrib import onnx as onnx_mxnet  # as MXNet code imported it

    assert onnx_mxnet.import_model is mx.onnx.import_model


def test_lrn_goes_to_onnx_and_back(tmp_path):
    from hybridlab import sym

    out = sym.LRN(sym.var("data"), nsize=5, alpha=1e-3, beta=0.75, knorm=2.0)
    path = mx.onnx.export_model(out, {}, [(1, 7, 3, 3)], np.float32, str(tmp_path / "l.onnx"))
    assert [n.op_type for n in onnx.load(path).graph.node] == ["LRN"]
    x = np.random.default_rng(2).normal(size=(1, 7, 3, 3)).astype(np.float32)
    expected = run_onnxruntime(onnx.load(path), {"data": x})
    back = mx.contrib.onnx.import_to_gluon(path)
    np.testing.assert_allclose(back(nd.array(x)).asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_import_to_gluon_loads_the_parameters_on_the_devices_asked_for():
    from onnx import TensorProto, helper, numpy_helper

    weight = np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    devices = [mx.cpu(0), mx.cpu(1)]
    net = mx.contrib.onnx.import_to_gluon(model, ctx=devices)
    assert net.params["w"].list_ctx() == devices
    x = np.ones((2, 4), np.float32)
    for device in devices:
        np.testing.assert_allclose(net(nd.array(x, ctx=device)).asnumpy(), x @ weight,
                                   rtol=1e-6)


@pytest.mark.parametrize("rank", [1, 3])
def test_one_and_three_dimensional_convolutions_import(rank):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(rank)
    shape, kernel = (1, 2) + (6,) * rank, (3,) * rank
    weight = rng.normal(size=(4, 2) + kernel).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=list(kernel),
                          pads=[1] * 2 * rank),
         helper.make_node("Relu", ["c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = rng.normal(size=shape).astype(np.float32)
    got = mx.contrib.onnx.import_to_gluon(model)(nd.array(x)).asnumpy()
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x}), rtol=1e-4, atol=1e-5)
    pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2] * rank, name="p")
    graph = helper.make_graph([pool], "g", graph.input, graph.output)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if rank == 1:
        got = mx.contrib.onnx.import_to_gluon(model)(nd.array(x)).asnumpy()
        np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x}))
    else:
        with pytest.raises(OnnxImportError, match=r"'p' \(MaxPool.*a 3-D window: "
                                                  r"hybridlab's MaxPool has 1-D to 2-D"):
            mx.contrib.onnx.import_model(model)


def test_a_constant_that_cannot_be_folded_names_its_node():
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["w", "bad_shape"], ["w2"], name="reshape_w"),
         helper.make_node("Add", ["x", "w2"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.ones((2, 3), np.float32), "w"),
         numpy_helper.from_array(np.array([4, 4], np.int64), "bad_shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"'reshape_w' \(Reshape, opset 13\): "
                                              r"ValueError: cannot reshape"):
        mx.contrib.onnx.import_model(model)
