"""gluon.model_zoo.vision: each family builds, hybridizes to the same numbers, exports to
MXNet's files (loaded back as a SymbolBlock) and to ONNX (run by onnxruntime), and draws."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import gluon, nd
from hybridlab.gluon.model_zoo import vision

FAMILIES = [("alexnet", 67), ("vgg11_bn", 32), ("resnet18_v1", 32), ("resnet50_v2", 32),
            ("squeezenet1.0", 67), ("squeezenet1.1", 64), ("densenet121", 32),
            ("mobilenet0.25", 32), ("mobilenetv2_0.25", 32), ("inceptionv3", 299)]


@pytest.mark.slow
@pytest.mark.parametrize("name, size", FAMILIES)
def test_a_zoo_network_hybridizes_exports_and_draws(name, size, tmp_path):
    mx.random.seed(0)
    net = vision.get_model(name, classes=10)
    net.initialize(mx.init.Xavier())
    x = nd.random.uniform(shape=(2 if size < 299 else 1, 3, size, size))
    imperative = net(x).asnumpy()
    assert imperative.shape == (x.shape[0], 10)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), imperative, rtol=1e-4, atol=1e-5)
    net.export(str(tmp_path / name))
    loaded = gluon.SymbolBlock.imports(str(tmp_path / f"{name}-symbol.json"), ["data"],
                                       str(tmp_path / f"{name}-0000.params"))
    np.testing.assert_allclose(loaded(x).asnumpy(), imperative, rtol=1e-4, atol=1e-5)
    drawing = mx.viz.draw(net)
    assert "Convolution" in drawing.source
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    path = mx.onnx.export_model(net, None, [x.shape], np.float32, str(tmp_path / "m.onnx"))
    onnx.checker.check_model(onnx.load(path))
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (ran,) = session.run(None, {session.get_inputs()[0].name: x.asnumpy()})
    np.testing.assert_allclose(ran, imperative, rtol=1e-4, atol=1e-5)


def test_pretrained_weights_are_refused_with_the_way_to_load_them():
    with pytest.raises(ValueError, match=r"downloads nothing.*load_parameters"):
        vision.resnet18_v1(pretrained=True)
    with pytest.raises(ValueError, match=r"downloads nothing"):
        vision.get_resnet(2, 50, pretrained=True)
    assert isinstance(vision.get_resnet(1, 18), vision.ResNet)
    with pytest.raises(ValueError, match="no model 'mobilenet2.0'"):
        vision.get_model("mobilenet2.0")


def test_units_with_an_empty_prefix_count_their_layers_in_the_stage_as_mxnet():
    net = vision.resnet18_v1(classes=10)
    names = list(net.collect_params())
    # two basic units of two convolutions each: conv0..conv3 in the stage's own count
    assert f"{net.prefix}stage1_conv3_weight" in names
    assert f"{net.prefix}stage1_conv4_weight" not in names


def test_mobilenet_convolves_each_channel_alone_and_names_parameters_as_mxnet():
    net = vision.get_model("mobilenetv2_0.25")
    names = list(net.collect_params())
    assert f"{net.prefix}features_bottleneck0_conv1_weight" in names
    net.initialize()
    net(nd.ones((1, 3, 32, 32)))
    depthwise = net.collect_params()[f"{net.prefix}features_bottleneck0_conv1_weight"]
    assert depthwise.shape == (8, 1, 3, 3)  # groups = channels: one 3x3 filter each
    assert net.features[-1].__class__.__name__ == "GlobalAvgPool2D"
