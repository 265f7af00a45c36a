"""MXNet's ``gluon.contrib.nn``: children side by side, the identity layer, and
``SyncBatchNorm`` on one device.

``HybridConcurrent(axis)`` runs every child on the same input and concatenates their
outputs along ``axis`` (an Inception module, a SqueezeNet fire module's two branches).
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.nn import BatchNorm, HybridSequential, Sequential


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
