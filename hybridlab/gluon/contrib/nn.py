"""MXNet's ``gluon.contrib.nn``: children side by side, and the identity layer.

``HybridConcurrent(axis)`` runs every child on the same input and concatenates their
outputs along ``axis`` (an Inception module, a SqueezeNet fire module's two branches).
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.nn import HybridSequential, Sequential


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
