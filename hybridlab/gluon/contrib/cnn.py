"""MXNet's ``gluon.contrib.cnn``: the deformable convolution layer.

``DeformableConvolution`` holds two convolutions: an ordinary one that looks at the input
and predicts, for every output position, where each tap of the kernel should read
(``2 * kh * kw * num_deformable_group`` channels of offsets, zero-initialised, so the
layer starts as a plain convolution), and the deformable one that reads there
(``contrib.DeformableConvolution``, ops/deformable.py).
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.nn.activations import Activation
from hybridlab.gluon.nn.basic_layers import _shape
from hybridlab.gluon.nn.conv_layers import _tuple


class DeformableConvolution(HybridBlock):
    """2-D deformable convolution v1 (NCHW) with its offset convolution."""

    def __init__(self, channels: int, kernel_size: Any = (1, 1), strides: Any = (1, 1),
                 padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1,
                 num_deformable_group: int = 1, layout: str = "NCHW", use_bias: bool = True,
                 in_channels: int = 0, activation: str | None = None,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 offset_weight_initializer: Any = "zeros",
                 offset_bias_initializer: Any = "zeros", offset_use_bias: bool = True,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        if layout != "NCHW":
            raise ValueError(f"DeformableConvolution: layout {layout!r} is not supported; "
                             f"give NCHW data (x.transpose((0, 3, 1, 2)) from NHWC)")
        kernel = _tuple(kernel_size, 2)
        geometry = {"kernel": kernel, "stride": _tuple(strides, 2), "dilate": _tuple(dilation, 2),
                    "pad": _tuple(padding, 2), "num_group": groups}
        offsets = 2 * kernel[0] * kernel[1] * num_deformable_group
        self._offset_attrs = {**geometry, "num_filter": offsets, "no_bias": not offset_use_bias}
        self._attrs: dict[str, Any] = {**geometry, "num_filter": channels, "no_bias": not use_bias,
                       "num_deformable_group": num_deformable_group}
        with self.name_scope():
            self.offset_weight = self.params.get(
                "offset_weight", shape=(offsets, in_channels // groups, *kernel),
                init=offset_weight_initializer, allow_deferred_init=True)
            self.offset_bias = self.params.get(
                "offset_bias", shape=(offsets,), init=offset_bias_initializer,
                allow_deferred_init=True) if offset_use_bias else None
            self.deformable_conv_weight = self.params.get(
                "deformable_conv_weight", shape=(channels, in_channels // groups, *kernel),
                init=weight_initializer, allow_deferred_init=True)
            self.deformable_conv_bias = self.params.get(
                "deformable_conv_bias", shape=(channels,), init=bias_initializer,
                allow_deferred_init=True) if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def _alias(self) -> str:
        return "deformable_conv"

    def infer_shape(self, x: Any, *args: Any) -> None:
        per_group = _shape(x)[1] // self._attrs["num_group"]
        for weight in (self.offset_weight, self.deformable_conv_weight):
            shape = weight.shape
            weight.shape = (shape[0], per_group, *shape[2:])  # type: ignore[index]

    def hybrid_forward(self, F: Any, x: Any, offset_weight: Any, deformable_conv_weight: Any,
                       offset_bias: Any = None, deformable_conv_bias: Any = None) -> Any:
        inputs = (x, offset_weight) if offset_bias is None else (x, offset_weight, offset_bias)
        offset = F.Convolution(*inputs, cudnn_off=True, **self._offset_attrs)
        inputs = (x, offset, deformable_conv_weight) + (
            () if deformable_conv_bias is None else (deformable_conv_bias,))
        out = F.contrib.DeformableConvolution(*inputs, name="fwd", **self._attrs)
        return self.act(out) if self.act is not None else out

    def __repr__(self) -> str:
        shape, attrs = self.deformable_conv_weight.shape, self._attrs
        return (f"{type(self).__name__}({shape[1] or None} -> {shape[0]}, "  # type: ignore[index]
                f"kernel_size={attrs['kernel']}, stride={attrs['stride']})")
