"""Convolution and pooling layers over NCHW images.

What this module teaches
------------------------
``Conv2D`` is ``Dense`` for images: the same deferred weight shape (the number of input
channels is read from the first input), one ``F.Convolution`` operator. Pooling layers
have no parameters; MXNet names all of them ``pool<n>_``, whatever their kind.
"""

from __future__ import annotations

from typing import Any

from hybridlab.errors import AttributeValueError
from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.nn.activations import Activation
from hybridlab.gluon.nn.basic_layers import _shape


def _pair(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


class Conv2D(HybridBlock):
    """2-D convolution over NCHW input with ``channels`` filters of ``kernel_size``."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, activation: str | None = None,
                 use_bias: bool = True, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_channels: int = 0, **kwargs: Any) -> None:
        if groups != 1:  # found now, not at the first call deep inside the operator
            raise AttributeValueError(
                f"Conv2D(groups={groups}): hybridlab's Convolution has no grouped form "
                f"(num_group=1 only). Fix: groups=1, or F.split the input channels into "
                f"groups, run one Conv2D on each and F.concat the results")
        super().__init__(**kwargs)
        self._attrs = {"kernel": _pair(kernel_size), "stride": _pair(strides),
                       "pad": _pair(padding), "dilate": _pair(dilation),
                       "num_filter": channels, "num_group": groups}
        with self.name_scope():
            shape = (channels, in_channels // groups, *self._attrs["kernel"])  # type: ignore[misc]
            self.weight = self.params.get("weight", shape=shape, init=weight_initializer)
            self.bias = self.params.get("bias", shape=(channels,), init=bias_initializer) \
                if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def _alias(self) -> str:
        return "conv"  # MXNet's name: conv0_weight

    def infer_shape(self, x: Any, *args: Any) -> None:
        shape = self.weight.shape
        self.weight.shape = (shape[0], _shape(x)[1] // self._attrs["num_group"], *shape[2:])  # type: ignore[index,operator]

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:
        inputs = (x, weight) if bias is None else (x, weight, bias)
        out = F.Convolution(*inputs, no_bias=bias is None, name="fwd", **self._attrs)
        return self.act(out) if self.act is not None else out

    def __repr__(self) -> str:  # MXNet's text: defaults left out, the activation inline
        attrs, shape = self._attrs, self.weight.shape
        text = (f"Conv2D({shape[1] or None} -> {shape[0]}, kernel_size={attrs['kernel']}, "  # type: ignore[index]
                f"stride={attrs['stride']}")
        text += f", padding={attrs['pad']}" if attrs["pad"] != (0, 0) else ""
        text += f", dilation={attrs['dilate']}" if attrs["dilate"] != (1, 1) else ""
        text += ", bias=False" if self.bias is None else ""
        return text + (f", {self.act})" if self.act is not None else ")")


class _Pool2D(HybridBlock):
    """Pooling over ``pool_size`` windows; subclasses choose ``_pool_type``."""

    _pool_type, _global = "max", False

    def __init__(self, pool_size: Any = (2, 2), strides: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attrs = {"kernel": _pair(pool_size), "pad": _pair(padding),
                       "stride": _pair(pool_size if strides is None else strides),
                       "pool_type": self._pool_type, "global_pool": self._global}
        if ceil_mode:  # MXNet's 'full' convention: a partial last window counts
            self._attrs["pooling_convention"] = "full"

    def _alias(self) -> str:
        return "pool"  # MXNet names every pooling layer pool<n>_

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.Pooling(x, name="fwd", **self._attrs)

    def __repr__(self) -> str:  # MXNet's text; its global pools show a (1, 1) window
        attrs, glob = self._attrs, self._global
        size, stride = ((1, 1), (1, 1)) if glob else (attrs["kernel"], attrs["stride"])
        return (f"{type(self).__name__}(size={size}, stride={stride}, padding={attrs['pad']}, "
                f"ceil_mode={glob}, global_pool={glob}, pool_type={self._pool_type}, "
                f"layout=NCHW)")


class MaxPool2D(_Pool2D):
    """The maximum of each ``pool_size`` window (stride defaults to the window size)."""


class AvgPool2D(_Pool2D):
    """The mean of each ``pool_size`` window (stride defaults to the window size)."""

    _pool_type = "avg"


class GlobalAvgPool2D(_Pool2D):
    """The mean over each whole feature map: ``(N, C, H, W) -> (N, C, 1, 1)``."""

    _pool_type, _global = "avg", True
