"""ONNX export: models pass onnx.checker and run in onnxruntime with hybridlab's outputs."""

import os

import numpy as np
import pytest
from _models import Residual, SeedLeNet

import hybridlab as mx
from hybridlab import nd, sym
from hybridlab.errors import OnnxExportError
from hybridlab.gluon import nn
from hybridlab.ops import registry

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "mxnet")


def _mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"), nn.Dense(2))
    return net, (1, 512)


def _convnet():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.LeakyReLU(0.1), Residual(8),
            nn.MaxPool2D(2), nn.AvgPool2D(2), nn.GlobalAvgPool2D(), nn.Flatten(),
            nn.Dropout(0.5), nn.Dense(10))
    return net, (2, 3, 8, 8)


MODELS = {"mlp": _mlp, "lenet": lambda: (SeedLeNet(), (1, 1, 28, 28)), "convnet": _convnet}


def _run(path, x):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_hybridized_block_runs_in_onnxruntime_at_every_batch_size(tmp_path, model):
    mx.random.seed(3)
    net, shape = MODELS[model]()
    net.initialize(mx.init.Xavier())
    if model == "convnet":  # running statistics away from 0 and 1
        with mx.autograd.record():
            net(nd.random.normal(1, 2, shape=shape))
    net.hybridize()
    net(nd.random.normal(shape=shape))
    path = mx.onnx.export_model(net, None, [shape], np.float32, str(tmp_path / "m.onnx"),
                                dynamic=True, dynamic_input_shapes=[(None, *shape[1:])])
    model_proto = onnx.load(path)
    onnx.checker.check_model(model_proto, full_check=True)
    assert model_proto.opset_import[0].version >= 13
    batch = model_proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_param == "batch"
    for size in (1, 5):
        x = np.random.default_rng(size).standard_normal((size, *shape[1:])).astype(np.float32)
        np.testing.assert_allclose(_run(path, x), net(nd.array(x)).asnumpy(), rtol=1e-4,
                                   atol=1e-5)


def test_mxnets_own_export_converts_and_matches_mxnets_outputs(tmp_path):
    """The MLP real MXNet 1.9.1 exported (tests/fixtures/mxnet): paths in, as MXNet takes."""
    io = np.load(os.path.join(FIXTURES, "mlp", "io.npz"))
    path = mx.onnx.export_model(os.path.join(FIXTURES, "mlp", "model-symbol.json"),
                                os.path.join(FIXTURES, "mlp", "model-0000.params"),
                                [io["x"].shape], np.float32, str(tmp_path / "mlp.onnx"))
    np.testing.assert_allclose(_run(path, io["x"]), io["y"], rtol=1e-5, atol=1e-6)


def test_a_symbol_and_a_params_dict_export(tmp_path):
    data = sym.var("data")
    out = sym.sigmoid(sym.FullyConnected(data, num_hidden=3, name="fc")) * 2 + 1
    params = {"arg:fc_weight": nd.array(np.arange(12).reshape(3, 4) / 10),
              "fc_bias": nd.array([0.1, 0.2, 0.3])}
    path = mx.onnx.export_model(out, params, [(2, 4)], [np.float32], str(tmp_path / "s.onnx"))
    x = np.ones((2, 4), np.float32)
    expected = out.eval(data=nd.array(x), fc_weight=params["arg:fc_weight"],
                        fc_bias=params["fc_bias"])[0].asnumpy()
    np.testing.assert_allclose(_run(path, x), expected, rtol=1e-6)


def test_an_operator_without_a_mapping_is_named(tmp_path):
    out = sym.sin(sym.var("data"), name="wave")
    with pytest.raises(OnnxExportError, match="operator 'sin' \\(node 'wave'\\) has no ONNX"):
        mx.onnx.export_model(out, {}, [(2,)], np.float32, str(tmp_path / "x.onnx"))
    assert not (tmp_path / "x.onnx").exists()


def test_wrong_input_shapes_say_what_the_graph_wants(tmp_path):
    out = sym.relu(sym.var("data"))
    with pytest.raises(ValueError, match="data inputs are \\['data'\\]"):
        mx.onnx.export_model(out, {}, [], np.float32, str(tmp_path / "x.onnx"))


def test_every_row_of_the_mapping_table_names_a_registry_operator():
    for name in mx.onnx.ONNX_OPS:
        assert registry.get(name).name == name


@pytest.mark.parametrize("model", ["mlp", "lenet", "convnet"])
def test_models_exported_by_mxnet_run_in_onnxruntime_as_mxnet_ran_them(model, tmp_path):
    """MXNet's own files (BatchNorm with its moving statistics, max pooling with its hidden
    output, LeakyReLU, a residual add) through export_model into onnxruntime."""
    import onnxruntime

    folder = os.path.join(os.path.dirname(__file__), "fixtures", "mxnet", model)
    io = np.load(os.path.join(folder, "io.npz"))
    path = mx.onnx.export_model(os.path.join(folder, "model-symbol.json"),
                                os.path.join(folder, "model-0000.params"),
                                in_shapes=[io["x"].shape], in_types=[np.float32],
                                onnx_file_path=str(tmp_path / f"{model}.onnx"))
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {session.get_inputs()[0].name: io["x"]})
    np.testing.assert_allclose(out, io["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, act, gamma", [
    ((2, 3, 4, 5), "prelu", (3,)), ((2, 3), "prelu", (2, 3)), ((2, 3), "selu", None),
    ((2, 3, 10), "conv1d", None)])
def test_prelu_selu_and_1d_convolution_export_as_they_compute(tmp_path, shape, act, gamma):
    """selu was once written as ONNX's Elu; prelu's per-channel slope must be reshaped to
    (C, 1, ...) for ONNX's right-aligned broadcasting; a 1-D convolution's geometry has
    one value per axis."""
    from hybridlab.onnx import export_model

    rng = np.random.default_rng(0)
    data = sym.var("data")
    if act == "conv1d":
        net = sym.Convolution(data, num_filter=4, kernel=(3,), stride=(2,), pad=(1,), name="c")
        net = sym.Pooling(net, kernel=(2,), stride=(2,), pooling_convention="same")
    elif gamma:
        net = sym.LeakyReLU(data, sym.var("gamma"), act_type=act)
    else:
        net = sym.LeakyReLU(data, act_type=act)
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=shape)[0]))
    params = {n: nd.array(rng.normal(size=s)) for n, s in shapes.items() if n != "data"}
    x = rng.normal(size=shape).astype(np.float32)
    expected = net.eval(data=nd.array(x), **params)[0].asnumpy()
    path = str(tmp_path / "m.onnx")
    export_model(net, params, [shape], np.float32, path)
    session = ort.InferenceSession(path)
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
