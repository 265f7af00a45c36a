"""Random operators: ``random.normal``, ``random.uniform``, ``random.randint``.

What this module teaches
------------------------
A random op is *not pure*: the same call gives different numbers each time, so the
compiler must never merge two of them (CSE) or fold one into a constant. That fact is
the field ``pure=False``; passes read it instead of keeping a list of random op names.

Determinism: the kernel never touches a global generator. It draws from ``rt.rng``, a
``numpy.random.Generator`` that the front end seeds when it pushes the op (from
``mx.random.seed``), so results do not depend on which engine worker runs it.

Dropout's random mask lives with the other layer operators in ``nn.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import AttributeValueError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Kind, OpDef, register


def _sampler(name: str, draw: Any, params: dict[str, Attr], aliases: tuple[str, ...], doc: str,
             dtype: str = "float32") -> Any:
    attrs = {**params, "shape": Attr("shape", (1,)), "dtype": Attr("dtype", dtype),
             "ctx": Attr("any", None)}  # MXNet's order: a fourth positional is the dtype

    def kernel(rt: Any, shape: tuple, ctx: Any, dtype: str, **values: Any) -> Any:
        _check(name, values)  # in the kernel, as MXNet: raised at the sync point
        return draw(rt.rng, shape, **values).astype(dtype)

    return register(OpDef(
        name=name, grad=None, kind=Kind.OPAQUE, inputs=(), attrs=attrs, pure=False,
        needs_context=True, aliases=aliases, doc=doc, kernel=kernel,
        infer=lambda shape, ctx, dtype, **kw: _infer.created(name, shape, dtype)))


# what MXNet's sampling kernels check (src/operator/random/sample_op.h): parameter -> test
_RULES: dict[str, tuple[Any, str]] = {
    "scale": (lambda v: v > 0, "is a standard deviation and must be > 0"),
}


def _check(name: str, params: dict[str, Any]) -> None:
    """A sampler's parameters must make sense: ``low <= high``, ``scale > 0``, ...

    Checked when the kernel runs, where MXNet checks them: an array that can never be
    computed is reported at the next sync point (``asnumpy``, ``wait_to_read``,
    ``waitall``), which names this operator and the line that pushed it.
    """
    if "high" in params and not params["low"] <= params["high"]:
        raise AttributeValueError(f"{name}: low={params['low']} must be less than or equal "
                                  f"to high={params['high']}")
    for param, (holds, rule) in _RULES.items():
        if param in params and not holds(params[param]):  # `not` also catches nan
            raise AttributeValueError(f"{name}: {param}={params[param]} {rule}")


_sampler("_random_normal", lambda rng, shape, loc, scale: rng.normal(loc, scale, shape),
         {"loc": Attr("float", 0.0), "scale": Attr("float", 1.0)},
         ("random.normal", "random_normal", "normal"),
         "Samples from the normal distribution with mean ``loc`` and std ``scale``.")
_sampler("_random_uniform", lambda rng, shape, low, high: rng.uniform(low, high, shape),
         {"low": Attr("float", 0.0), "high": Attr("float", 1.0)},
         ("random.uniform", "random_uniform", "uniform"),
         "Samples from the uniform distribution on ``[low, high)``.")
def _integers(rng: Any, shape: tuple, low: int, high: int) -> Any:
    """``[low, high)``; ``low == high`` gives ``low`` (MXNet accepts it, numpy does not)."""
    return rng.integers(low, high, shape) if high > low else np.full(shape, low)


_sampler("_random_randint", _integers,
         {"low": Attr("int"), "high": Attr("int")}, ("random.randint", "random_randint"),
         "Integers drawn uniformly from ``[low, high)`` (int32 by default).", "int32")
