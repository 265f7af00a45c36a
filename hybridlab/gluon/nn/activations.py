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

from hybridlab.gluon._trace import shape_of
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


class PReLU(HybridBlock):
    """Leaky relu whose slope ``alpha`` is learned, one per channel (axis 1) or shared."""

    def __init__(self, alpha_initializer: Any = None, in_channels: int = 1,
                 **kwargs: Any) -> None:
        from hybridlab import initializer
        super().__init__(**kwargs)
        with self.name_scope():
            self.alpha = self.params.get("alpha", shape=(in_channels,),
                                         init=alpha_initializer or initializer.Constant(0.25))

    def hybrid_forward(self, F: Any, x: Any, alpha: Any) -> Any:
        ndim = len(shape_of(x))
        slope = F.reshape(alpha, shape=(1, -1) + (1,) * (ndim - 2)) if ndim > 1 else alpha
        return F.relu(x) + F.broadcast_mul(slope, F.minimum(x, 0.0))


class ELU(HybridBlock):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""

    def __init__(self, alpha: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.LeakyReLU(x, act_type="elu", slope=self._alpha, name="fwd")


class SELU(HybridBlock):
    """Scaled ELU with the self-normalising constants (Klambauer et al., 2017)."""

    _scale, _alpha = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.where(x >= 0, x * self._scale, F.expm1(x) * (self._scale * self._alpha))


class Swish(HybridBlock):
    """``x * sigmoid(beta * x)`` (Ramachandran et al., 2017)."""

    def __init__(self, beta: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._beta = beta

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return x * F.sigmoid(x * self._beta)


def _erf(F: Any, x: Any) -> Any:
    """erf(x) to within 1.5e-7 (Abramowitz & Stegun 7.1.26; hybridlab has no erf operator)."""
    a = F.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    return F.sign(x) * (1.0 - poly * F.exp(-(a * a)))


class GELU(HybridBlock):
    """``x * Phi(x)``, Phi the standard normal's distribution function (Hendrycks & Gimpel)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return 0.5 * x * (1.0 + _erf(F, x * 0.7071067811865476))
