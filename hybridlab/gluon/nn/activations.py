"""Activation layers: a nonlinearity applied elementwise, as a block of its own.

What this module teaches
------------------------
An activation is the smallest possible HybridBlock: no parameters, one operator. It is
still a block so that a network can list it (``nn.Dense(256, activation='relu')``
holds an ``Activation('relu')`` child, and MXNet's repr shows it) and so that the
traced operator gets the block's name (``relu0_fwd``).
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.block import HybridBlock


class Activation(HybridBlock):
    """``relu``, ``sigmoid``, ``tanh``, ``softrelu`` or ``softsign``, applied elementwise."""

    def __init__(self, activation: str, **kwargs: Any) -> None:
        self._act_type = activation  # set first: _alias() names the block after it
        super().__init__(**kwargs)

    def _alias(self) -> str:
        return self._act_type

    def __repr__(self) -> str:
        return f"Activation({self._act_type})"

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.Activation(x, act_type=self._act_type, name="fwd")


class LeakyReLU(HybridBlock):
    """``x`` where positive, ``alpha * x`` elsewhere."""

    def __init__(self, alpha: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._alpha = alpha

    def __repr__(self) -> str:
        return f"LeakyReLU({self._alpha})"

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.LeakyReLU(x, act_type="leaky", slope=self._alpha, name="fwd")
