"""Convolution and pooling layers over 1-, 2- and 3-D images.

What this module teaches
------------------------
``Conv2D`` is ``Dense`` for images: the same deferred weight shape (the number of input
channels is read from the first input), one ``F.Convolution`` operator. Pooling layers
have no parameters; MXNet names all of them ``pool<n>_``, whatever their kind.

hybridlab's ``Convolution`` operator takes 1-, 2- and 3-D data and ``Pooling`` 1- and
2-D; 3-D pooling is written with the 2-D operator, as a reader could by hand: it pools
each depth slice's (H, W) windows, then the depth windows (max and mean are separable).
Channel-last layouts (``NHWC`` ...) are transposed to channel-first and back.
"""

from __future__ import annotations

from typing import Any

from hybridlab.errors import ShapeError
from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.nn.activations import Activation
from hybridlab.gluon.nn.basic_layers import _shape

_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _tuple(value: Any, ndim: int) -> tuple[int, ...]:
    return (value,) * ndim if isinstance(value, int) else tuple(value)


def _pair(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


def _check_layout(layout: str, ndim: int, what: str) -> bool:
    """True for a channel-last layout (transposed around the operator)."""
    if layout not in _LAYOUTS[ndim]:
        raise ValueError(f"{what}: layout={layout!r}; a {ndim}-D layer takes one of "
                         f"{_LAYOUTS[ndim]}")
    return layout != _LAYOUTS[ndim][0]


def _channels_first(F: Any, x: Any, last: bool, ndim: int) -> Any:
    return F.transpose(x, axes=(0, ndim + 1, *range(1, ndim + 1))) if last else x


def _channels_last(F: Any, x: Any, last: bool, ndim: int) -> Any:
    return F.transpose(x, axes=(0, *range(2, ndim + 2), 1)) if last else x


class _Conv(HybridBlock):
    """N-D convolution with ``channels`` filters of ``kernel_size`` (N = ``_ndim``)."""

    _ndim, _transposed = 2, False

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, layout: str | None = None,
                 activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        n = self._ndim
        self._last = _check_layout(layout or _LAYOUTS[n][0], n, type(self).__name__)
        self._attrs: dict[str, Any] = {"kernel": _tuple(kernel_size, n),
                                       "stride": _tuple(strides, n),
                       "pad": _tuple(padding, n), "dilate": _tuple(dilation, n),
                       "num_filter": channels, "num_group": groups}
        if channels % groups or in_channels % groups:
            raise ValueError(f"{type(self).__name__}: groups={groups} must divide channels="
                             f"{channels} and in_channels={in_channels}")
        with self.name_scope():
            shape = (in_channels, channels // groups, *self._attrs["kernel"]) if \
                self._transposed else (channels, in_channels // groups, *self._attrs["kernel"])
            self.weight = self.params.get("weight", shape=shape, init=weight_initializer)
            self.bias = self.params.get("bias", shape=(channels,), init=bias_initializer) \
                if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def _alias(self) -> str:
        return "conv"  # MXNet's name: conv0_weight

    def infer_shape(self, x: Any, *args: Any) -> None:
        shape = self.weight.shape
        channels = _shape(x)[-1 if self._last else 1]
        self.weight.shape = (channels, *shape[1:]) if self._transposed else (  # type: ignore[index]
            shape[0], channels // self._attrs["num_group"], *shape[2:])  # type: ignore[index]

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:
        x = _channels_first(F, x, self._last, self._ndim)
        out = self._convolve(F, x, weight, bias)
        out = self.act(out) if self.act is not None else out
        return _channels_last(F, out, self._last, self._ndim)

    def _convolve(self, F: Any, x: Any, weight: Any, bias: Any) -> Any:
        inputs = (x, weight) if bias is None else (x, weight, bias)
        return F.Convolution(*inputs, no_bias=bias is None, name="fwd", **self._attrs)

    def __repr__(self) -> str:  # MXNet's text: defaults left out, the activation inline
        attrs, shape, n = self._attrs, self.weight.shape, self._ndim
        text = (f"{type(self).__name__}({shape[1] or None} -> {shape[0]}, "  # type: ignore[index]
                f"kernel_size={attrs['kernel']}, stride={attrs['stride']}")
        text += f", padding={attrs['pad']}" if attrs["pad"] != (0,) * n else ""
        text += f", dilation={attrs['dilate']}" if attrs["dilate"] != (1,) * n else ""
        text += f", groups={attrs['num_group']}" if attrs["num_group"] != 1 else ""
        text += ", bias=False" if self.bias is None else ""
        return text + (f", {self.act})" if self.act is not None else ")")


class Conv1D(_Conv):
    """1-D convolution over (N, C, W) input (the Convolution operator takes NCW data)."""

    _ndim = 1


class Conv2D(_Conv):
    """2-D convolution over NCHW input with ``channels`` filters of ``kernel_size``."""


class Conv3D(_Conv):
    """3-D convolution over (N, C, D, H, W) input (the Convolution operator takes NCDHW)."""

    _ndim = 3


class Conv2DTranspose(_Conv):
    """The transpose of a convolution (its gradient with respect to its input): each input
    pixel adds ``weight`` times itself into a ``kernel_size`` window of the output, windows
    ``strides`` apart. Written as MXNet's docs explain it: zeros inserted between the
    input's pixels (``strides - 1``), then an ordinary convolution with the kernel flipped
    and its two channel axes swapped. The weight is ``(in_channels, channels / groups,
    kh, kw)``, as MXNet's."""

    _transposed = True

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, dilation: Any = 1, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, **kwargs)
        self._adj = _tuple(output_padding, 2)
        if any(a >= s for a, s in zip(self._adj, self._attrs["stride"])):
            raise ValueError(f"Conv2DTranspose: output_padding={self._adj} must be smaller "
                             f"than strides={self._attrs['stride']}")

    def _convolve(self, F: Any, x: Any, weight: Any, bias: Any) -> Any:
        a = self._attrs
        groups, channels = a["num_group"], a["num_filter"]
        size, pads, crops = list(_shape(x)[2:]), [], []
        for i, (k, s, p, d, adj) in enumerate(zip(a["kernel"], a["stride"], a["pad"],
                                                  a["dilate"], self._adj)):
            axis, out = 2 + i, (size[i] - 1) * s - 2 * p + d * (k - 1) + 1 + adj
            if out < 1:
                raise ShapeError(f"Conv2DTranspose: an input of {size[i]} along axis {axis} "
                                 f"with padding {p} leaves no output ({out}); pad less")
            if s > 1:  # s - 1 zeros after each pixel, the last ones cut off
                wide = F.expand_dims(x, axis=axis + 1)
                x = F.concat(wide, *[F.zeros_like(wide)] * (s - 1), dim=axis + 1)
                x = F.reshape(x, shape=(0, 0, -3, -2) if axis == 2 else (0, 0, 0, -3))
                x = F.slice_axis(x, axis=axis, begin=0, end=(size[i] - 1) * s + 1)
            if adj:  # output_padding: more zeros at the far end
                x = F.concat(x, F.zeros_like(F.slice_axis(x, axis=axis, begin=0, end=adj)),
                             dim=axis)
            pads.append(max(d * (k - 1) - p, 0))
            crops.append((max(p - d * (k - 1), 0), out))
        kernel = F.reverse(weight, axis=(2, 3))  # (C, F/g, kh, kw) -> (F, C/g, kh, kw)
        kernel = F.reshape(kernel, shape=(groups, -1, channels // groups, *a["kernel"]))
        kernel = F.reshape(F.transpose(kernel, axes=(0, 2, 1, 3, 4)), shape=(-3, -2))
        out = F.Convolution(x, kernel, no_bias=True, kernel=a["kernel"], pad=tuple(pads),
                            dilate=a["dilate"], num_filter=channels, num_group=groups,
                            name="fwd")
        for i, (begin, length) in enumerate(crops):
            if begin:
                out = F.slice_axis(out, axis=2 + i, begin=begin, end=begin + length)
        if bias is not None:
            out = F.broadcast_add(out, F.reshape(bias, shape=(1, -1, 1, 1)))
        return out


class _Pool(HybridBlock):
    """Pooling over ``pool_size`` windows; subclasses choose the kind and dimension."""

    _pool_type, _global, _ndim = "max", False, 2

    def __init__(self, pool_size: Any = 2, strides: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, layout: str | None = None,
                 count_include_pad: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        n = self._ndim
        self._last = _check_layout(layout or _LAYOUTS[n][0], n, type(self).__name__)
        self._layout = layout or _LAYOUTS[n][0]
        size = _tuple(pool_size, n)
        self._attrs: dict[str, Any] = {"kernel": size, "pad": _tuple(padding, n),
                       "stride": size if strides is None else _tuple(strides, n),
                       "pool_type": self._pool_type, "global_pool": self._global}
        if ceil_mode:  # MXNet's 'full' convention: a partial last window counts
            self._attrs["pooling_convention"] = "full"
        if not count_include_pad:
            self._attrs["count_include_pad"] = False

    def _alias(self) -> str:
        return "pool"  # MXNet names every pooling layer pool<n>_

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        x = _channels_first(F, x, self._last, self._ndim)
        if self._ndim < 3:
            out = F.Pooling(x, name="fwd", **self._attrs)
        else:  # (H, W) windows of each depth slice, then the depth windows
            n, c, d, h, w = _shape(x)
            flat = F.Pooling(F.reshape(x, shape=(0, -3, -2)), **self._axes([1, 2]))
            out = F.Pooling(F.reshape(flat, shape=(0, c, d, -1)), name="fwd",
                            **self._axes([0], 1))
            out = F.reshape(out, shape=(0, 0, 0, *_shape(flat)[2:]))
        return _channels_last(F, out, self._last, self._ndim)

    def _axes(self, axes: list[int], pad_to: int | None = None) -> dict[str, Any]:
        """The 2-D attributes pooling only ``axes`` of the window (the other of the two
        2-D axes, at ``pad_to``, gets a window of 1)."""
        attrs = dict(self._attrs)
        for key, one in (("kernel", 1), ("stride", 1), ("pad", 0)):
            picked = [self._attrs[key][a] for a in axes]
            if pad_to is not None:
                picked.insert(pad_to, one)
            attrs[key] = tuple(picked)
        return attrs

    def __repr__(self) -> str:  # MXNet's text; its global pools show a (1, 1) window
        attrs, glob, n = self._attrs, self._global, self._ndim
        size, stride = ((1,) * n, (1,) * n) if glob else (attrs["kernel"], attrs["stride"])
        return (f"{type(self).__name__}(size={size}, stride={stride}, padding={attrs['pad']}, "
                f"ceil_mode={glob}, global_pool={glob}, pool_type={self._pool_type}, "
                f"layout={self._layout})")


def _pools() -> dict[str, type]:
    """MaxPool1D ... GlobalAvgPool3D: one class per kind and dimension, as MXNet has."""
    made = {}
    for n in (1, 2, 3):
        for name, kind, glob in (("MaxPool", "max", False), ("AvgPool", "avg", False),
                                 ("GlobalMaxPool", "max", True), ("GlobalAvgPool", "avg", True)):
            doc = (f"{'Global ' if glob else ''}{kind} pooling over {n}-D windows "
                   f"({'each whole feature map' if glob else 'stride defaults to the window'}).")
            made[f"{name}{n}D"] = type(f"{name}{n}D", (_Pool,), {
                "_pool_type": kind, "_global": glob, "_ndim": n, "__doc__": doc,
                "__module__": __name__})
    return made


globals().update(_pools())


class ReflectionPad2D(HybridBlock):
    """Pad H and W of NCHW data by ``padding`` on each side with their mirror images
    (the border row is not repeated: ``[1, 2, 3]`` padded by 1 is ``[2, 1, 2, 3, 2]``)."""

    def __init__(self, padding: Any = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(padding, int):
            padding = (0, 0, 0, 0) + (padding,) * 4
        if len(padding) != 8 or any(padding[:4]):
            raise ValueError(f"ReflectionPad2D: padding={padding!r}; give an int, or MXNet's "
                             f"8-tuple (0, 0, 0, 0, top, bottom, left, right)")
        self._pads = ((2, padding[4], padding[5]), (3, padding[6], padding[7]))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        for axis, before, after in self._pads:
            size = _shape(x)[axis]
            if max(before, after) >= size:
                raise ValueError(f"ReflectionPad2D: padding {max(before, after)} needs more "
                                 f"than {size} rows or columns along axis {axis}")
            parts = [x]
            if before:
                parts.insert(0, F.reverse(F.slice_axis(x, axis=axis, begin=1, end=before + 1),
                                          axis=axis))
            if after:
                parts.append(F.reverse(F.slice_axis(x, axis=axis, begin=size - after - 1,
                                                    end=size - 1), axis=axis))
            x = F.concat(*parts, dim=axis) if len(parts) > 1 else x
        return x
