"""MXNet's further elementwise math: rounding, ``hypot``, gamma functions, ``smooth_l1``,
and ``contrib``'s value tests (``isnan``, ``isinf``, ``isfinite``, ``allclose``).

What this module teaches
------------------------
The same :class:`OpDef` rows as ``elementwise.py`` (a kernel, a shape rule, a gradient
written with ``F``), for the operators MXNet code reaches for less often. The gamma
functions show a gradient that needs an operator of its own: ``d/dx lgamma(x)`` is the
digamma function, so ``digamma`` is a primitive (numpy has no ufunc for it; its kernel
uses the recurrence ``psi(x) = psi(x + 1) - 1/x`` and the asymptotic series).

Invariants
----------
* Kernels keep the input's dtype (``_same_dtype``), as in ``elementwise.py``.
* ``contrib.*`` value tests are composites written with ``F``: nothing to differentiate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hybridlab.ops.elementwise import _arith, _unary
from hybridlab.ops.registry import Attr, Kind, OpDef, composite, register


def _digamma(x: np.ndarray) -> np.ndarray:
    """psi(x): shift x above 6 with psi(x) = psi(x + 1) - 1/x, then the asymptotic series."""
    values = np.asarray(x, dtype=np.float64).copy()
    result = np.zeros_like(values)
    reflect = values < 0.5  # psi(1 - x) - psi(x) = pi / tan(pi x)
    result[reflect] -= np.pi / np.tan(np.pi * values[reflect])
    values[reflect] = 1.0 - values[reflect]
    while (small := values < 6.0).any():
        result[small] -= 1.0 / values[small]
        values[small] += 1.0
    inv2 = 1.0 / (values * values)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240))))
    return result + np.log(values) - 0.5 / values - series


def _total(fn: Any) -> Any:
    """``fn`` on every element; where math refuses (poles, overflow): inf, as MXNet gives."""
    def one(value: float) -> float:
        try:
            result: float = fn(value)
        except (ValueError, OverflowError):
            return math.inf
        return result
    return np.vectorize(one, otypes=[np.float64])


_gamma, _lgamma = _total(math.gamma), _total(math.lgamma)

_unary("rcbrt", lambda x: 1 / np.cbrt(x), lambda F, g, x, out: g * out / x * (-1 / 3),
       "Elementwise ``1 / cbrt(x)``.")
_unary("rint", np.rint, None, "Elementwise round to the nearest integer (gradient zero).")
_unary("fix", np.fix, None, "Elementwise round towards zero (gradient zero).")
_unary("trunc", np.trunc, None, "Elementwise drop the fraction (gradient zero).")
_unary("digamma", _digamma, None, "Elementwise digamma ``psi(x) = d/dx log(gamma(x))``.")
_unary("gamma", _gamma, lambda F, g, x, out: g * out * F.digamma(x), "Elementwise gamma.")
_unary("gammaln", _lgamma, lambda F, g, x, out: g * F.digamma(x),
       "Elementwise ``log(|gamma(x)|)``.")
_arith("_hypot", np.hypot, lambda F, g, a, b, out: [g * a / out, g * b / out],
       ("hypot", "broadcast_hypot"), "``sqrt(lhs ** 2 + rhs ** 2)`` with broadcasting.")


def _smooth_l1(x: np.ndarray, scalar: float) -> np.ndarray:
    s2 = scalar * scalar
    return np.where(np.abs(x) < 1 / s2, 0.5 * s2 * x * x, np.abs(x) - 0.5 / s2).astype(x.dtype)


register(OpDef(
    name="smooth_l1", kernel=_smooth_l1, kind=Kind.ELEMENTWISE, attrs={"scalar": Attr("float")},
    infer=lambda x, scalar: [x],
    grad=lambda F, inputs, outputs, out_grads, scalar: [out_grads[0] * F.where(
        F.abs(inputs[0]) < 1 / (scalar * scalar), inputs[0] * (scalar * scalar),
        F.sign(inputs[0]))],
    doc="MXNet's smooth L1: ``0.5 (s x) ** 2`` where ``|x| < 1/s**2``, else ``|x| - 0.5/s**2``."))


@composite("_contrib_isnan", ("contrib.isnan",))
def isnan(F: Any, data: Any, name: Any = None) -> Any:
    """1 where ``data`` is NaN, else 0 (NaN is the one value not equal to itself)."""
    return F.broadcast_not_equal(data, data, name=name)


@composite("_contrib_isinf", ("contrib.isinf",))
def isinf(F: Any, data: Any, name: Any = None) -> Any:
    """1 where ``data`` is +inf or -inf, else 0."""
    return F._equal_scalar(F.abs(data), scalar=float("inf"), name=name)


@composite("_contrib_isfinite", ("contrib.isfinite",))
def isfinite(F: Any, data: Any, name: Any = None) -> Any:
    """1 where ``data`` is neither NaN nor infinite, else 0."""
    finite = F._not_equal_scalar(F.abs(data), scalar=float("inf"))
    return F.broadcast_mul(finite, F.broadcast_equal(data, data), name=name)


@composite("_contrib_allclose", ("contrib.allclose",))
def allclose(F: Any, a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = True, name: Any = None) -> Any:
    """1 if every ``|a - b| <= atol + rtol * |b|`` (NaNs equal when ``equal_nan``), else 0."""
    bound = F._plus_scalar(F._mul_scalar(F.abs(b), scalar=float(rtol)), scalar=float(atol))
    close = F.broadcast_lesser_equal(F.abs(F.broadcast_sub(a, b)), bound)
    if equal_nan:
        both_nan = F.broadcast_mul(F.broadcast_not_equal(a, a), F.broadcast_not_equal(b, b))
        close = F.broadcast_maximum(close, both_nan)
    return F.min(close, name=name)


@composite("pow")
def pow_(F: Any, base: Any, exp: Any, name: Any = None) -> Any:
    """MXNet's ``pow(base, exp)``: ``power``, either side a number or an array."""
    return F.power(base, exp, name=name)
