"""``gluon.model_zoo.vision``: the classic image classifiers as Gluon blocks.

What this module teaches
------------------------
A model zoo network is nothing but layers: each definition below is a few
``HybridSequential`` stacks of ``Conv2D``, ``BatchNorm``, pooling and ``Dense``, so it
hybridizes, exports (``net.export``: MXNet's ``-symbol.json`` and ``.params``), converts
to ONNX and draws like any block. The parameter names follow MXNet's (``resnetv10_conv0_
weight``), so weights saved by MXNet's model zoo load with ``load_parameters``.

hybridlab downloads nothing: ``pretrained=True`` is refused with the way to get weights
(MXNet's ``.params`` file, loaded with ``net.load_parameters``). MobileNet's depthwise
convolutions are ``Conv2D(groups=channels)`` (NOTE [Groups] in ops/conv.py); Inception v3's
branches run side by side in ``contrib.nn.HybridConcurrent`` and needs 299x299 images
(its last pooling window is MXNet's fixed 8x8).
"""

from __future__ import annotations

from typing import Any, Callable

from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.contrib.nn import HybridConcurrent
from hybridlab.gluon.nn import (
    Activation,
    AvgPool2D,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool2D,
    HybridSequential,
    MaxPool2D,
)


def _no_pretrained(name: str, pretrained: bool) -> None:
    if pretrained:
        raise ValueError(f"{name}(pretrained=True): hybridlab downloads nothing. Build the "
                         f"network with pretrained=False, then load MXNet's weights from a "
                         f"file: net.load_parameters('{name}-0000.params')")


def _conv_bn(channels: int, kernel: Any, stride: int = 1, pad: Any = 0, relu: bool = True,
             groups: int = 1, epsilon: float = 1e-5) -> list:
    layers = [Conv2D(channels, kernel, stride, pad, groups=groups, use_bias=False),
              BatchNorm(epsilon=epsilon)]
    return layers + [Activation("relu")] if relu else layers


# --- AlexNet, VGG -----------------------------------------------------------------------
class AlexNet(HybridBlock):
    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = HybridSequential(prefix="")
            with self.features.name_scope():
                for channels, kernel, stride, pad, pool in (
                        (64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
                        (256, 3, 1, 1, False), (256, 3, 1, 1, True)):
                    self.features.add(Conv2D(channels, kernel, stride, pad, activation="relu"))
                    if pool:
                        self.features.add(MaxPool2D(pool_size=3, strides=2))
                self.features.add(Flatten())
                for _ in range(2):
                    self.features.add(Dense(4096, activation="relu"), Dropout(0.5))
            self.output = Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


_VGG_SPEC = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
             13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
             16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
             19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


class VGG(HybridBlock):
    def __init__(self, layers: list, filters: list, classes: int = 1000,
                 batch_norm: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = HybridSequential(prefix="")
            with self.features.name_scope():
                for count, channels in zip(layers, filters):
                    for _ in range(count):
                        self.features.add(Conv2D(channels, 3, padding=1))
                        if batch_norm:
                            self.features.add(BatchNorm())
                        self.features.add(Activation("relu"))
                    self.features.add(MaxPool2D(strides=2))
                self.features.add(Flatten())
                for _ in range(2):
                    self.features.add(Dense(4096, activation="relu"), Dropout(0.5))
            self.output = Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


# --- ResNet v1 / v2 ---------------------------------------------------------------------
class _Residual(HybridBlock):
    """One residual unit: basic (two 3x3) or bottleneck (1x1, 3x3, 1x1); v2 puts BatchNorm
    and relu before each convolution."""

    def __init__(self, channels: int, stride: int, downsample: bool, in_channels: int,
                 bottleneck: bool, version: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._v2 = version == 2
        with self.name_scope():
            self.body = HybridSequential(prefix="")
            shapes = ([(channels // 4, 1, stride, 0), (channels // 4, 3, 1, 1), (channels, 1, 1, 0)]
                      if bottleneck else [(channels, 3, stride, 1), (channels, 3, 1, 1)])
            for i, (c, k, s, p) in enumerate(shapes):
                if self._v2:
                    self.body.add(BatchNorm(), Activation("relu"),
                                  Conv2D(c, k, s, p, use_bias=False))
                else:
                    self.body.add(*_conv_bn(c, k, s, p, relu=i < len(shapes) - 1))
            self.downsample = None
            if downsample:
                self.downsample = HybridSequential(prefix="")
                self.downsample.add(Conv2D(channels, 1, stride, use_bias=False,
                                           in_channels=in_channels))
                if not self._v2:
                    self.downsample.add(BatchNorm())

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        residual = x if self.downsample is None else self.downsample(x)
        out = self.body(x) + residual  # one shape: MXNet's elementwise add
        return out if self._v2 else F.Activation(out, act_type="relu")


_RESNET_SPEC = {18: (False, [2, 2, 2, 2], [64, 64, 128, 256, 512]),
                34: (False, [3, 4, 6, 3], [64, 64, 128, 256, 512]),
                50: (True, [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
                101: (True, [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
                152: (True, [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}


class ResNet(HybridBlock):
    def __init__(self, version: int, num_layers: int, classes: int = 1000,
                 thumbnail: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        bottleneck, counts, channels = _RESNET_SPEC[num_layers]
        with self.name_scope():
            self.features = HybridSequential(prefix="")
            if thumbnail:
                self.features.add(Conv2D(channels[0], 3, 1, 1, use_bias=False))
            else:
                self.features.add(*_conv_bn(channels[0], 7, 2, 3), MaxPool2D(3, 2, 1))
            for stage, count in enumerate(counts):
                stride = 1 if stage == 0 else 2
                layer = HybridSequential(prefix=f"stage{stage + 1}_")
                with layer.name_scope():
                    for unit in range(count):
                        layer.add(_Residual(
                            channels[stage + 1], stride if unit == 0 else 1,
                            unit == 0 and (stride != 1 or channels[stage] != channels[stage + 1]),
                            channels[stage] if unit == 0 else channels[stage + 1],
                            bottleneck, version, prefix=""))
                self.features.add(layer)
            if version == 2:
                self.features.add(BatchNorm(), Activation("relu"))
            self.features.add(GlobalAvgPool2D(), Flatten())
            self.output = Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


# --- SqueezeNet, DenseNet ---------------------------------------------------------------
def _fire(squeeze: int, expand: int) -> HybridSequential:
    out = HybridSequential(prefix="")
    out.add(Conv2D(squeeze, 1, activation="relu"))
    both = HybridConcurrent(axis=1, prefix="")
    both.add(Conv2D(expand, 1, activation="relu"), Conv2D(expand, 3, padding=1,
                                                          activation="relu"))
    out.add(both)
    return out


class SqueezeNet(HybridBlock):
    def __init__(self, version: str, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        fires = [(16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256),
                 (64, 256)]
        pool_after = {2, 4} if version == "1.1" else {3, 7}
        with self.name_scope():
            self.features = HybridSequential(prefix="")
            first = (96, 7, 2) if version == "1.0" else (64, 3, 2)
            self.features.add(Conv2D(*first, activation="relu"),
                              MaxPool2D(3, 2, ceil_mode=True))
            for i, (squeeze, expand) in enumerate(fires):
                if i in pool_after:
                    self.features.add(MaxPool2D(3, 2, ceil_mode=True))
                self.features.add(_fire(squeeze, expand))
            self.features.add(Dropout(0.5))
            self.output = HybridSequential(prefix="")
            self.output.add(Conv2D(classes, 1, activation="relu"), GlobalAvgPool2D(),
                            Flatten())

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


class _DenseLayer(HybridBlock):
    def __init__(self, growth_rate: int, bn_size: int, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = HybridSequential(prefix="")
            self.body.add(BatchNorm(), Activation("relu"),
                          Conv2D(bn_size * growth_rate, 1, use_bias=False),
                          BatchNorm(), Activation("relu"),
                          Conv2D(growth_rate, 3, padding=1, use_bias=False))
            if dropout:
                self.body.add(Dropout(dropout))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.concat(x, self.body(x), dim=1)


_DENSENET_SPEC = {121: (64, 32, [6, 12, 24, 16]), 161: (96, 48, [6, 12, 36, 24]),
                  169: (64, 32, [6, 12, 32, 32]), 201: (64, 32, [6, 12, 48, 32])}


class DenseNet(HybridBlock):
    def __init__(self, num_init_features: int, growth_rate: int, block_config: list,
                 bn_size: int = 4, dropout: float = 0, classes: int = 1000,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = HybridSequential(prefix="")
            self.features.add(*_conv_bn(num_init_features, 7, 2, 3), MaxPool2D(3, 2, 1))
            features = num_init_features
            for i, count in enumerate(block_config):
                stage = HybridSequential(prefix=f"stage{i + 1}_")
                with stage.name_scope():
                    for _ in range(count):
                        stage.add(_DenseLayer(growth_rate, bn_size, dropout, prefix=""))
                self.features.add(stage)
                features += count * growth_rate
                if i != len(block_config) - 1:
                    features //= 2
                    self.features.add(BatchNorm(), Activation("relu"),
                                      Conv2D(features, 1, use_bias=False), AvgPool2D(2, 2))
            self.features.add(BatchNorm(), Activation("relu"), GlobalAvgPool2D(), Flatten())
            self.output = Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


# --- MobileNet v1 / v2 ------------------------------------------------------------------
class MobileNet(HybridBlock):
    """Depthwise-separable convolutions: a 3x3 convolution per channel (groups = channels),
    then a 1x1 convolution mixing the channels; ``multiplier`` thins every layer."""

    def __init__(self, multiplier: float = 1.0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        width = [int(c * multiplier) for c in [32, 64, 128, 128, 256, 256] + [512] * 6
                 + [1024, 1024]]
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        with self.name_scope():
            self.features = HybridSequential(prefix="")
            with self.features.name_scope():
                self.features.add(*_conv_bn(width[0], 3, 2, 1))
                for depthwise, channels, stride in zip(width, width[1:], strides):
                    self.features.add(*_conv_bn(depthwise, 3, stride, 1, groups=depthwise),
                                      *_conv_bn(channels, 1))
                self.features.add(GlobalAvgPool2D(), Flatten())
            self.output = Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


class BottleNeck(HybridBlock):
    """MobileNet v2's unit: widen ``t`` times (1x1), depthwise 3x3, narrow (1x1, linear);
    the input is added back when the shapes allow."""

    def __init__(self, in_channels: int, channels: int, t: int, stride: int,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shortcut = stride == 1 and in_channels == channels
        wide = in_channels * t
        with self.name_scope():
            self.out = HybridSequential()
            self.out.add(*_conv_bn(wide, 1), *_conv_bn(wide, 3, stride, 1, groups=wide),
                         *_conv_bn(channels, 1, relu=False))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        out = self.out(x)
        return F.elemwise_add(out, x) if self._shortcut else out


class MobileNetV2(HybridBlock):
    def __init__(self, multiplier: float = 1.0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        widths = [int(c * multiplier) for c in [32, 16, 24, 24, 32, 32, 32] + [64] * 4
                  + [96] * 3 + [160] * 3 + [320]]
        strides = [1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1]
        with self.name_scope():
            self.features = HybridSequential(prefix="features_")
            with self.features.name_scope():
                self.features.add(*_conv_bn(widths[0], 3, 2, 1))
                for i, stride in enumerate(strides):
                    self.features.add(BottleNeck(widths[i], widths[i + 1],
                                                        1 if i == 0 else 6, stride))
                self.features.add(*_conv_bn(int(1280 * multiplier) if multiplier > 1 else 1280,
                                            1), GlobalAvgPool2D())
            self.output = HybridSequential(prefix="output_")
            with self.output.name_scope():
                self.output.add(Conv2D(classes, 1, use_bias=False, prefix="pred_"),
                                Flatten(prefix="flat_"))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


# --- Inception v3 -----------------------------------------------------------------------
def _branch(pool: str | None, *convs: tuple) -> HybridSequential:
    """One Inception branch: an optional pooling, then conv-BN-relu units given as
    ``(channels, kernel, stride, padding)``."""
    out = HybridSequential(prefix="")
    if pool == "avg":
        out.add(AvgPool2D(3, 1, 1))
    elif pool == "max":
        out.add(MaxPool2D(3, 2))
    for channels, kernel, stride, pad in convs:
        out.add(*_conv_bn(channels, kernel, stride or 1, pad or 0, epsilon=0.001))
    return out


def _mixed(prefix: str, *branches: Callable[[], HybridBlock]) -> HybridConcurrent:
    """The branches side by side, built inside the block's name scope (``A1_conv0_``)."""
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(*[build() for build in branches])
    return out


def _inception_a(pool_features: int, prefix: str) -> HybridConcurrent:
    return _mixed(prefix, lambda: _branch(None, (64, 1, None, None)),
                  lambda: _branch(None, (48, 1, None, None), (64, 5, None, 2)),
                  lambda: _branch(None, (64, 1, None, None), (96, 3, None, 1),
                                  (96, 3, None, 1)),
                  lambda: _branch("avg", (pool_features, 1, None, None)))


def _inception_c(c7: int, prefix: str) -> HybridConcurrent:
    row, col = ((1, 7), (0, 3)), ((7, 1), (3, 0))
    return _mixed(prefix, lambda: _branch(None, (192, 1, None, None)),
                  lambda: _branch(None, (c7, 1, None, None), (c7, row[0], None, row[1]),
                                  (192, col[0], None, col[1])),
                  lambda: _branch(None, (c7, 1, None, None), (c7, col[0], None, col[1]),
                                  (c7, row[0], None, row[1]), (c7, col[0], None, col[1]),
                                  (192, row[0], None, row[1])),
                  lambda: _branch("avg", (192, 1, None, None)))


def _split_3x3(first: tuple, *rest: tuple) -> HybridSequential:
    """A branch ending in a 1x3 and a 3x1 convolution side by side (Inception's E)."""
    out = HybridSequential(prefix="")
    out.add(_branch(None, first, *rest))
    both = HybridConcurrent(axis=1, prefix="")
    both.add(_branch(None, (384, (1, 3), None, (0, 1))), _branch(None, (384, (3, 1), None,
                                                                        (1, 0))))
    out.add(both)
    return out


def _inception_e(prefix: str) -> HybridConcurrent:
    return _mixed(prefix, lambda: _branch(None, (320, 1, None, None)),
                  lambda: _split_3x3((384, 1, None, None)),
                  lambda: _split_3x3((448, 1, None, None), (384, 3, None, 1)),
                  lambda: _branch("avg", (192, 1, None, None)))


class Inception3(HybridBlock):
    """Inception v3 for 299x299 images: stem convolutions, then mixed blocks whose
    branches (1x1, 5x5, stacked 3x3, factorised 1x7/7x1, pooling) are concatenated."""

    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = HybridSequential(prefix="")
            for channels, kernel, stride, pad in ((32, 3, 2, 0), (32, 3, 1, 0), (64, 3, 1, 1)):
                self.features.add(*_conv_bn(channels, kernel, stride, pad, epsilon=0.001))
            self.features.add(MaxPool2D(3, 2), *_conv_bn(80, 1, epsilon=0.001),
                              *_conv_bn(192, 3, epsilon=0.001), MaxPool2D(3, 2))
            self.features.add(_inception_a(32, "A1_"), _inception_a(64, "A2_"),
                              _inception_a(64, "A3_"))
            self.features.add(_mixed("B_", lambda: _branch(None, (384, 3, 2, None)),
                                     lambda: _branch(None, (64, 1, None, None),
                                                     (96, 3, None, 1), (96, 3, 2, None)),
                                     lambda: _branch("max")))
            for i, c7 in enumerate((128, 160, 160, 192)):
                self.features.add(_inception_c(c7, f"C{i + 1}_"))
            self.features.add(_mixed("D_", lambda: _branch(None, (192, 1, None, None),
                                                           (320, 3, 2, None)),
                                     lambda: _branch(None, (192, 1, None, None),
                                                     (192, (1, 7), None, (0, 3)),
                                                     (192, (7, 1), None, (3, 0)),
                                                     (192, 3, 2, None)),
                                     lambda: _branch("max")))
            self.features.add(_inception_e("E1_"), _inception_e("E2_"), AvgPool2D(8),
                              Dropout(0.5))
            self.output = Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


# --- the constructors MXNet's model zoo has ---------------------------------------------
def _constructor(name: str, build: Callable[..., HybridBlock]) -> Callable[..., HybridBlock]:
    def make(pretrained: bool = False, ctx: Any = None, root: Any = None,
             **kwargs: Any) -> HybridBlock:
        _no_pretrained(name, pretrained)
        return build(**kwargs)
    make.__name__ = name
    make.__doc__ = f"MXNet's ``{name}`` network (definition only; ``pretrained`` is refused)."
    return make


_MODELS: dict[str, Callable[..., HybridBlock]] = {"alexnet": _constructor("alexnet", AlexNet)}
for _n in _VGG_SPEC:
    _MODELS[f"vgg{_n}"] = _constructor(f"vgg{_n}", lambda n=_n, **kw: VGG(*_VGG_SPEC[n], **kw))
    _MODELS[f"vgg{_n}_bn"] = _constructor(
        f"vgg{_n}_bn", lambda n=_n, **kw: VGG(*_VGG_SPEC[n], batch_norm=True, **kw))
for _v in (1, 2):
    for _n in _RESNET_SPEC:
        _MODELS[f"resnet{_n}_v{_v}"] = _constructor(
            f"resnet{_n}_v{_v}", lambda v=_v, n=_n, **kw: ResNet(v, n, **kw))
for _version in ("1.0", "1.1"):
    _MODELS[f"squeezenet{_version}"] = _constructor(
        f"squeezenet{_version}", lambda v=_version, **kw: SqueezeNet(v, **kw))
for _n in _DENSENET_SPEC:
    _MODELS[f"densenet{_n}"] = _constructor(
        f"densenet{_n}", lambda n=_n, **kw: DenseNet(*_DENSENET_SPEC[n], **kw))
for _m in ("1.0", "0.75", "0.5", "0.25"):
    _MODELS[f"mobilenet{_m}"] = _constructor(
        f"mobilenet{_m}", lambda m=float(_m), **kw: MobileNet(m, **kw))
    _MODELS[f"mobilenetv2_{_m}"] = _constructor(
        f"mobilenetv2_{_m}", lambda m=float(_m), **kw: MobileNetV2(m, **kw))
_MODELS["inceptionv3"] = _constructor("inceptionv3", Inception3)
inception_v3 = _MODELS["inceptionv3"]
globals().update({name.replace(".", "_"): make for name, make in _MODELS.items()})


def get_resnet(version: int, num_layers: int, pretrained: bool = False, ctx: Any = None,
               root: Any = None, **kwargs: Any) -> HybridBlock:
    """ResNet ``version`` 1 or 2 with ``num_layers`` 18, 34, 50, 101 or 152 (MXNet's)."""
    _no_pretrained(f"resnet{num_layers}_v{version}", pretrained)
    if version not in (1, 2) or num_layers not in _RESNET_SPEC:
        raise ValueError(f"get_resnet: version must be 1 or 2 and num_layers one of "
                         f"{sorted(_RESNET_SPEC)}, got {version} and {num_layers}")
    return ResNet(version, num_layers, **kwargs)


def get_model(name: str, **kwargs: Any) -> HybridBlock:
    """The network called ``name`` (``'resnet18_v1'``, ``'vgg16'``, ``'squeezenet1.0'``)."""
    if name.lower() not in _MODELS:
        raise ValueError(f"get_model: no model {name!r}; hybridlab has {sorted(_MODELS)}")
    return _MODELS[name.lower()](**kwargs)
