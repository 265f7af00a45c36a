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


# Every model as shipped (opset 9). Converted to opset 13 (Unsqueeze, Softmax, Dropout, Clip
# change meaning there) and 18, the fewest models that hold every operator type of the nine
# between them (test_each_opset_imports_every_operator_type_of_the_light_models): the same
# importer rules in a bigger network (VGG-19, ZFNet: minutes each for onnxruntime's and
# hybridlab's copies of their weights) would test nothing more.
AT_13 = ("inception_v1", "inception_v2", "shufflenet", "squeezenet")
AT_18 = ("inception_v1", "squeezenet", "inception_v2", "shufflenet")
CASES = ([(name, 9) for name in MODELS] + [(name, 13) for name in AT_13]
         + [(name, 18) for name in AT_18])


def test_each_opset_imports_every_operator_type_of_the_light_models():
    def kinds(names):
        return {node.op_type for name in names
                for node in onnx.load(os.path.join(LIGHT, f"light_{name}.onnx")).graph.node}

    assert kinds(AT_13) == kinds(AT_18) == kinds(MODELS)


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- files that cannot hurt: every error documented, memory priced first, data beside ----
def _model(nodes, initializers=(), inputs=(("x", [2, 3]),), outputs=(("y", None),),
           opset=13, ir_version=None):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def test_an_initializer_whose_bytes_do_not_match_its_shape_is_refused_by_name():
    from onnx import numpy_helper

    weight = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    weight.raw_data = weight.raw_data[:-4]
    model = _model([onnx.helper.make_node("Add", ["x", "w"], ["y"])], [weight])
    with pytest.raises(OnnxImportError, match=r"initializer 'w' holds 20 bytes, but its shape "
                                              r"\[2, 3\] and type need 24"):
        mx.contrib.onnx.import_model(model)
    text = onnx.helper.make_tensor("names", onnx.TensorProto.STRING, [1], [b"a"])
    model = _model([onnx.helper.make_node("Add", ["x", "names"], ["y"])], [text])
    with pytest.raises(OnnxImportError, match="'names' has type STRING"):
        mx.contrib.onnx.import_model(model)


def test_memory_is_priced_before_a_constant_is_made_and_refused_above_the_limit():
    import tracemalloc

    from onnx import numpy_helper

    from hybridlab.config import Context

    def constant_of_shape(elements):
        shape = numpy_helper.from_array(np.array([elements], np.int64), "shape")
        return _model([onnx.helper.make_node("ConstantOfShape", ["shape"], ["w"], name="fill"),
                       onnx.helper.make_node("Add", ["x", "w"], ["y"])], [shape],
                      inputs=(("x", [elements]),))

    eight_gib = constant_of_shape(2**31)  # float32 zeros: a 200-byte file asking for 8 GiB
    assert len(eight_gib.SerializeToString()) < 300
    tracemalloc.start()
    try:
        with pytest.raises(OnnxImportError, match=r"'fill' \(ConstantOfShape, opset 13\): its "
                                                  r"folded value needs 8,589,934,592 bytes.*"
                                                  r"HYBRIDLAB_ONNX_MAX_BYTES = 1,073,741,824"):
            mx.contrib.onnx.import_model(eight_gib)
        assert tracemalloc.get_traced_memory()[1] < 32 * 2**20
    finally:
        tracemalloc.stop()
    with Context(ONNX_MAX_BYTES=2**20):
        with pytest.raises(OnnxImportError, match="more than HYBRIDLAB_ONNX_MAX_BYTES"):
            mx.contrib.onnx.import_model(constant_of_shape(2**18))  # 1 MiB, over with x
        sym, args, _ = mx.contrib.onnx.import_model(constant_of_shape(2**10))
    assert args["w"].shape == (2**10,)


def test_a_weight_read_only_by_an_unused_node_is_left_out():
    from onnx import numpy_helper

    used = numpy_helper.from_array(np.full((2, 3), 2.0, np.float32), "used")
    unused = numpy_helper.from_array(np.ones((3, 3), np.float32), "unused")
    model = _model([onnx.helper.make_node("Mul", ["x", "used"], ["y"]),
                    onnx.helper.make_node("MatMul", ["x", "unused"], ["dangling"])],
                   [used, unused])
    _, args, _ = mx.contrib.onnx.import_model(model)
    assert sorted(args) == ["used"]
    net = mx.contrib.onnx.import_to_gluon(model)
    assert net(nd.ones((2, 3))).asnumpy().tolist() == [[2.0] * 3] * 2


@pytest.mark.parametrize("opset,message", [(2**62, r"opset 4611686018427387904 is not an "
                                                   r"ONNX opset: they run from 1 to \d+"),
                                           (0, r"opset 0 is not an ONNX opset")])
def test_an_opset_onnx_does_not_define_is_refused(opset, message):
    model = _model([onnx.helper.make_node("Relu", ["x"], ["y"])], opset=opset)
    with pytest.raises(OnnxImportError, match=message):
        mx.contrib.onnx.import_model(model)


def _external_model(folder, location, values):
    from onnx.external_data_helper import set_external_data

    weight = onnx.numpy_helper.from_array(values, "w")
    set_external_data(weight, location, 0, values.nbytes)
    weight.ClearField("raw_data")
    return _model([onnx.helper.make_node("Add", ["x", "w"], ["y"])], [weight])


def test_external_data_is_read_only_from_beside_the_model(tmp_path, monkeypatch):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    model_dir, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    model_dir.mkdir()
    elsewhere.mkdir()
    (model_dir / "weights.bin").write_bytes(values.tobytes())
    (elsewhere / "weights.bin").write_bytes((values + 100).tobytes())
    (tmp_path / "secret.bin").write_bytes(b"\x00" * 24)
    path = model_dir / "m.onnx"
    path.write_bytes(_external_model(model_dir, "weights.bin", values).SerializeToString())
    monkeypatch.chdir(elsewhere)  # a same-named file in the current folder is never read
    _, args, _ = mx.contrib.onnx.import_model(str(path))
    np.testing.assert_array_equal(args["w"].asnumpy(), values)
    with pytest.raises(OnnxImportError, match="a model passed in memory has no folder"):
        mx.contrib.onnx.import_model(onnx.load(str(path), load_external_data=False))
    (model_dir / "link.bin").symlink_to(tmp_path / "secret.bin")
    for location, message in (("../secret.bin", "not a file name beside the model"),
                              (str(tmp_path / "secret.bin"), "not a file name beside"),
                              ("link.bin", "leads out of the model's folder")):
        path.write_bytes(_external_model(model_dir, location, values).SerializeToString())
        with pytest.raises(OnnxImportError, match=message):
            mx.contrib.onnx.import_model(str(path))


def test_a_model_path_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    with pytest.raises(OnnxImportError, match="FIFO"):
        mx.contrib.onnx.import_model(str(fifo))
    with pytest.raises(OnnxImportError, match="directory"):
        mx.contrib.onnx.get_model_metadata(str(tmp_path))


def _weights_as_initializers(model, ir_version, declared):
    """``model`` (randomized: weights in Constant nodes) with every weight an initializer,
    listed among the graph's inputs or not, under the given IR version."""
    from onnx import helper

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    constants = [n for n in copy.graph.node if n.op_type == "Constant"]
    for node in constants:
        tensor = onnx.numpy_helper.from_array(
            onnx.numpy_helper.to_array(node.attribute[0].t), node.output[0])
        copy.graph.initializer.append(tensor)
        if declared:
            copy.graph.input.append(helper.make_tensor_value_info(
                tensor.name, tensor.data_type, list(tensor.dims)))
        copy.graph.node.remove(node)
    stored = {t.name for t in copy.graph.initializer}
    if not declared:  # the light models list their shape constants among the inputs too
        kept = [i for i in copy.graph.input if i.name not in stored]
        del copy.graph.input[:]
        copy.graph.input.extend(kept)
    copy.ir_version = ir_version
    return copy


@pytest.mark.parametrize("name", ["inception_v1", "squeezenet"])
def test_light_models_with_weights_as_initializers_match_onnxruntime(name, recwarn):
    base = randomized(onnx.load(os.path.join(LIGHT, f"light_{name}.onnx")))
    (data, shape), = mx.contrib.onnx.get_model_metadata(base)["input_tensor_data"]
    x = np.random.default_rng(4).normal(size=shape).astype(np.float32)
    expected = run_onnxruntime(_weights_as_initializers(base, 7, True), {data: x})
    for ir_version, declared in ((3, True), (3, False), (7, True), (7, False)):
        model = _weights_as_initializers(base, ir_version, declared)
        recwarn.clear()
        net = mx.contrib.onnx.import_to_gluon(model)
        warned = [str(w.message) for w in recwarn if "IR version" in str(w.message)]
        assert bool(warned) == (ir_version == 3 and not declared), warned
        if warned:
            assert "are not among the graph's inputs, which ONNX requires before IR " \
                   "version 4" in warned[0]
        if ir_version > 3 or declared:  # (onnxruntime refuses the IR-3 file that breaks
            np.testing.assert_allclose(  # its rule; hybridlab reads it, compared below)
                run_onnxruntime(model, {data: x}), expected, rtol=1e-5, atol=1e-6)
        got = net(nd.array(x)).asnumpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def test_shapes_come_from_hybridlabs_inference_and_a_missing_one_names_the_node():
    from onnx import TensorProto, helper

    def flatten_at_2(shape):
        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Flatten", ["r"], ["y"], axis=2, name="flat")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    net = mx.contrib.onnx.import_to_gluon(flatten_at_2([2, 3, 4]))
    np.testing.assert_array_equal(net(nd.array(x)).asnumpy(), x.reshape(6, 4))
    free_batch = mx.contrib.onnx.import_to_gluon(flatten_at_2(["N", 3, 4]))
    np.testing.assert_array_equal(free_batch(nd.array(x)).asnumpy(), x.reshape(6, 4))
    with pytest.raises(OnnxImportError, match=r"'flat' \(Flatten, opset 13\): Flatten at axis 2 "
                                              r"needs the shape of 'r', and hybridlab infers "
                                              r"only \(0, 3, 0\) \(0: a size not known"):
        mx.contrib.onnx.import_model(flatten_at_2(["N", 3, "K"]))
