"""MXNet's ``gluon.contrib.nn``: children side by side, the identity layer, and
``SyncBatchNorm`` on one device.

``HybridConcurrent(axis)`` runs every child on the same input and concatenates their
outputs along ``axis`` (an Inception module, a SqueezeNet fire module's two branches).
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.nn import BatchNorm, Embedding, HybridSequential, Sequential


class HybridConcurrent(HybridSequential):
    """Children side by side on one input, outputs concatenated along ``axis``."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._axis = axis

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.concat(*[block(x) for block in self._children.values()], dim=self._axis)


class Concurrent(Sequential):
    """:class:`HybridConcurrent` for plain Blocks (not compiled)."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._axis = axis

    def forward(self, x: Any) -> Any:
        from hybridlab import ndarray
        return ndarray.concat(*[block(x) for block in self._children.values()], dim=self._axis)  # type: ignore[attr-defined]


class Identity(HybridBlock):
    """Returns its input (a placeholder branch in a HybridConcurrent)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return x


class SyncBatchNorm(BatchNorm):
    """MXNet's cross-device BatchNorm: the batch statistics of all ``num_devices`` slices
    together. With one device that is BatchNorm itself. Several devices are refused:
    MXNet's version makes each device's forward wait until every device has given its
    sums, which needs the devices' forwards to run at once (one thread each); a loop
    ``[bn(x) for x in slices]`` in one Python thread would wait forever."""

    def __init__(self, in_channels: int = 0, num_devices: int | None = None,
                 momentum: float = 0.9, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, use_global_stats: bool = False, **kwargs: Any) -> None:
        if num_devices not in (None, 1):
            raise ValueError(f"SyncBatchNorm(num_devices={num_devices!r}): hybridlab computes "
                             f"batch statistics on one device only (the devices' forwards run "
                             f"one after another here, and a synchronised one would wait for "
                             f"the others forever). Fix: num_devices=1, or nn.BatchNorm per "
                             f"device")
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center,
                         scale=scale, use_global_stats=use_global_stats,
                         in_channels=in_channels, **kwargs)


class SparseEmbedding(Embedding):
    """MXNet's Embedding with a row-sparse gradient. hybridlab stores every gradient
    densely, so it is :class:`~hybridlab.gluon.nn.Embedding` (the same values; the rows
    not looked up hold zeros)."""

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: Any = None, **kwargs: Any) -> None:
        super().__init__(input_dim, output_dim, dtype=dtype,
                         weight_initializer=weight_initializer, **kwargs)


class _PixelShuffle(HybridBlock):
    """Channels folded into space: (N, C * f1 * f2 ..., d1, d2 ...) becomes
    (N, C, d1 * f1, d2 * f2 ...) -- each output block of f1 x f2 ... pixels takes its
    values from f1 * f2 ... channels (super-resolution, Shi et al.)."""

    dims = 1

    def __init__(self, factor: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        factors = (factor,) * self.dims if isinstance(factor, int) else tuple(factor)
        if len(factors) != self.dims or any(f < 1 for f in factors):
            raise ValueError(f"{type(self).__name__}: factor must be a positive int or "
                             f"{self.dims} of them, got {factor!r}")
        self._factors = factors

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        dims, factors = self.dims, self._factors
        # (N, C*f1*f2.., d1, d2..) -> (N, C, f1, f2.., d1, d2..): -4 splits an axis in
        # two, 0 copies one axis, -2 all the rest
        split = x.reshape((0, -4, -1, _product(factors)) + (-2,))
        for i, f in enumerate(factors[:-1]):
            split = split.reshape((0, 0) + (0,) * i + (-4, f, -1) + (-2,))
        # interleave: (N, C, d1, f1, d2, f2 ...)
        order = (0, 1) + tuple(a for i in range(dims) for a in (2 + dims + i, 2 + i))
        merged = F.transpose(split, axes=order)
        for i in range(dims):  # each (d_i, f_i) pair becomes one axis d_i * f_i
            merged = merged.reshape((0, 0) + (0,) * i + (-3,) + (-2,))
        return merged

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._factors if self.dims > 1 else self._factors[0]})"


def _product(values: tuple) -> int:
    total = 1
    for value in values:
        total *= value
    return total


class PixelShuffle1D(_PixelShuffle):
    """(N, C * f, W) -> (N, C, W * f)."""

    dims = 1


class PixelShuffle2D(_PixelShuffle):
    """(N, C * f1 * f2, H, W) -> (N, C, H * f1, W * f2)."""

    dims = 2


class PixelShuffle3D(_PixelShuffle):
    """(N, C * f1 * f2 * f3, D, H, W) -> (N, C, D * f1, H * f2, W * f3)."""

    dims = 3
